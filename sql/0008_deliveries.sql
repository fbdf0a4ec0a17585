-- appstore-reconcile ledger, migration 0008: re-delivery of recovered notifications to the
-- team's own webhook handler. Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts
-- what psql applied.
--
-- One row per (notification, target URL) to deliver: queued by the statement that records the
-- recovered notification (`run --deliver-to URL`), so that a crash between recording and
-- delivering loses nothing. A 2xx answer sets delivered_at in its own statement right after the
-- answer, and a row with delivered_at is never sent to that target again; anything else counts an
-- attempt and leaves the row pending for the next attempt, run or `deliver --to URL`. The one
-- window for a second delivery is between a 2xx and the commit of its row (the process killed in
-- between): receivers dedupe by notificationUUID, as they must for Apple's own retries.
-- target: the URL as given (https, or http to a loopback address).
CREATE TABLE IF NOT EXISTS app_store.deliveries (
    notification_uuid uuid NOT NULL REFERENCES app_store.notifications (notification_uuid) ON DELETE CASCADE,
    target            text NOT NULL,
    run_id            uuid,
    queued_at         timestamptz NOT NULL DEFAULT now(),
    attempts          integer NOT NULL DEFAULT 0,
    last_status       integer,
    last_error        text,
    last_attempt_at   timestamptz,
    delivered_at      timestamptz,
    PRIMARY KEY (target, notification_uuid)
);

CREATE INDEX IF NOT EXISTS deliveries_pending ON app_store.deliveries (target) WHERE delivered_at IS NULL;

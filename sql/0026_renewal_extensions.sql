-- appstore-reconcile ledger, migration 0026: the renewal-date extensions `compensate` asked Apple
-- for. Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- `compensate --start T --end T` extends the renewal date of each subscription the outage hurt
-- (Extend a Subscription Renewal Date, reason code 3, "service issue or outage"). One row per
-- subscription and window, keyed by the request's identifier: a UUID derived from the app, the
-- environment, the originalTransactionId and the window's bounds, so that compensating the same
-- window again finds its rows and sends nothing new.
--
--   outcome         extended (Apple answered 200: effective_date is the new expiry), refused
--                   (Apple's status and error code), skipped (a third extension in 365 days: not
--                   sent), pending (written before sending; left so when no answer came or the
--                   run ended: the next compensate of the window sends it again, the same
--                   request_identifier, which Apple extends once), not_sent (certainly not
--                   extended: Apple's 429 or 5xx, a refused key; sent again likewise, and not
--                   counted as an extension)
--   requested_at    when the row was first written; updated_at when it last changed
--   notification_uuid  the missed notification that denied access longest; notification_uuids
--                   every granting notification of the subscription missed in the window: one
--                   missed notification is made good once, whichever window's compensate names it
--
-- The ledger's expiry is not moved here: Apple's RENEWAL_EXTENDED notification is recorded as any
-- other (serve, or the next run) and moves it.

CREATE TABLE IF NOT EXISTS app_store.renewal_extensions (
    bundle_id               text NOT NULL,
    environment             text NOT NULL,
    original_transaction_id text NOT NULL,
    request_identifier      uuid NOT NULL,
    extend_by_days          integer NOT NULL CHECK (extend_by_days BETWEEN 1 AND 90),
    reason_code             integer NOT NULL,
    requested_at            timestamptz NOT NULL DEFAULT now(),
    effective_date          timestamptz,
    outcome                 text NOT NULL CHECK (outcome IN ('extended', 'refused', 'skipped', 'pending', 'not_sent')),
    window_start            timestamptz,
    window_end              timestamptz,
    notification_uuid       uuid,
    notification_uuids      uuid[],
    hours_denied            double precision,
    apple_status            integer,
    apple_error             bigint,
    detail                  text,
    run_id                  uuid,
    updated_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bundle_id, environment, original_transaction_id, request_identifier)
);

CREATE INDEX IF NOT EXISTS renewal_extensions_recent
    ON app_store.renewal_extensions (bundle_id, environment, original_transaction_id, requested_at);
CREATE INDEX IF NOT EXISTS renewal_extensions_notification
    ON app_store.renewal_extensions (bundle_id, environment, notification_uuid);

-- `compensate --all-active --days N`: Extend Subscription Renewal Dates for All Active Subscribers,
-- one row per product and request (its identifier derived from the pair, product, days and the
-- outage's window), followed with Get Status of Subscription Renewal Date Extensions until
-- `complete` (the same command run again goes on following it instead of sending it again).
CREATE TABLE IF NOT EXISTS app_store.mass_extensions (
    bundle_id               text NOT NULL,
    environment             text NOT NULL,
    product_id              text NOT NULL,
    request_identifier      uuid NOT NULL,
    extend_by_days          integer NOT NULL CHECK (extend_by_days BETWEEN 1 AND 90),
    reason_code             integer NOT NULL,
    requested_at            timestamptz NOT NULL DEFAULT now(),
    accepted                boolean NOT NULL DEFAULT false,
    complete                boolean NOT NULL DEFAULT false,
    complete_date           timestamptz,
    succeeded_count         bigint,
    failed_count            bigint,
    run_id                  uuid,
    PRIMARY KEY (bundle_id, environment, product_id, request_identifier)
);

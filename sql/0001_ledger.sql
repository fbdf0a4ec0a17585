-- appstore-reconcile ledger, migration 0001: the tables a live webhook handler and the
-- reconciler share. Names are a contract: add columns and tables freely, rename nothing.
--
-- Apply with `appstore-reconcile migrate`, or with your own tooling:
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 --single-transaction -f sql/0001_ledger.sql
-- Every statement is idempotent, so running a file twice (or psql first, then `migrate`) is safe.
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its indexes on them are created only while they are tables (every earlier file has done its work by then). The earlier text:
-- amends checksum b4e8718175c2e5b5a8143372d109933f1ce19ca5112cd6521351b13036498b99

CREATE SCHEMA IF NOT EXISTS app_store;

-- One row per App Store Server Notification V2, keyed by Apple's notificationUUID (unchanged
-- across Apple's retries). signed_payload is the JWS exactly as received.
CREATE TABLE IF NOT EXISTS app_store.notifications (
    notification_uuid       uuid PRIMARY KEY,
    notification_type       text NOT NULL,
    subtype                 text,
    signed_date             timestamptz NOT NULL,
    environment             text NOT NULL,
    original_transaction_id text,
    transaction_id          text,
    signed_payload          text NOT NULL,
    source                  text NOT NULL CHECK (source IN ('webhook', 'history')),
    recorded_at             timestamptz NOT NULL DEFAULT now()
);
DO $$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        CREATE INDEX IF NOT EXISTS notifications_customer_idx
            ON app_store.notifications (original_transaction_id, signed_date);
        CREATE INDEX IF NOT EXISTS notifications_signed_date_idx
            ON app_store.notifications (signed_date);
    END IF;
END
$$;

-- One row per transaction (purchase, renewal, restore), the newest signed version of it.
CREATE TABLE IF NOT EXISTS app_store.transactions (
    transaction_id          text PRIMARY KEY,
    original_transaction_id text NOT NULL,
    product_id              text,
    product_type            text,
    purchase_date           timestamptz,
    expires_date            timestamptz,
    revocation_date         timestamptz,
    revocation_reason       integer,
    is_upgraded             boolean,
    signed_date             timestamptz NOT NULL,
    environment             text,
    signed_transaction      text NOT NULL,
    recorded_at             timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);
DO $$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        CREATE INDEX IF NOT EXISTS transactions_customer_idx
            ON app_store.transactions (original_transaction_id, purchase_date);
        CREATE INDEX IF NOT EXISTS transactions_signed_date_idx
            ON app_store.transactions (signed_date);
    END IF;
END
$$;

-- One row per auto-renewable subscription (originalTransactionId): its state as of
-- last_signed_date, the signedDate of the newest information applied to it. Information
-- signed earlier never overwrites it.
-- status: Apple's 1 active, 2 expired, 3 billing retry, 4 billing grace period, 5 revoked.
-- auto_renew_status: Apple's 0 off, 1 on.
CREATE TABLE IF NOT EXISTS app_store.subscriptions (
    original_transaction_id   text PRIMARY KEY,
    product_id                text,
    status                    smallint,
    expires_date              timestamptz,
    auto_renew_status         smallint,
    auto_renew_product_id     text,
    is_in_billing_retry       boolean,
    grace_period_expires_date timestamptz,
    last_signed_date          timestamptz NOT NULL,
    updated_at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS subscriptions_status_expiry_idx
    ON app_store.subscriptions (status, expires_date);
CREATE INDEX IF NOT EXISTS subscriptions_last_signed_date_idx
    ON app_store.subscriptions (last_signed_date);

-- The Get Transaction History revision token after a customer's last complete, committed
-- fetch (sort=ASCENDING); the next fetch starts there and returns only what changed since.
CREATE TABLE IF NOT EXISTS app_store.history_revisions (
    original_transaction_id text PRIMARY KEY,
    revision                text NOT NULL,
    fetched_at              timestamptz NOT NULL
);

-- One row per reconcile run. outcome: running, succeeded, succeeded_with_rejections,
-- interrupted, failed. counts: the run's summary counters as JSON.
CREATE TABLE IF NOT EXISTS app_store.runs (
    run_id        uuid PRIMARY KEY,
    kind          text NOT NULL,
    environment   text NOT NULL,
    window_start  timestamptz,
    window_end    timestamptz,
    dry_run       boolean NOT NULL DEFAULT false,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    outcome       text NOT NULL DEFAULT 'running',
    counts        jsonb NOT NULL DEFAULT '{}'::jsonb,
    host          text,
    pid           integer
);
CREATE INDEX IF NOT EXISTS runs_kind_finished_idx
    ON app_store.runs (kind, outcome, finished_at);

-- Payloads that failed verification: kept with the reason, never applied.
-- notification_uuid is read from the unverified payload, for reports only (null if unreadable).
CREATE TABLE IF NOT EXISTS app_store.rejected_payloads (
    rejection_id      bigserial PRIMARY KEY,
    run_id            uuid REFERENCES app_store.runs (run_id) ON DELETE SET NULL,
    source            text NOT NULL,
    notification_uuid text,
    reason            text NOT NULL,
    detail            text NOT NULL,
    signed_payload    text NOT NULL,
    rejected_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS rejected_payloads_run_idx
    ON app_store.rejected_payloads (run_id);

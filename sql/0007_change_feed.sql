-- appstore-reconcile ledger, migration 0007: the change feed.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- One row per change the tool makes to app_store.subscriptions or app_store.transactions,
-- written by the statement that makes the change (so in its database transaction), by every
-- path: a live notification (`ingest`, cause 'webhook'), pass 1 of a run (cause 'history') and
-- pass 2 (cause 'repair'). A backend follows it by id: `SELECT … WHERE id > $last ORDER BY id`,
-- woken by NOTIFY app_store_changes (payload: the commit's highest id), or with
-- `appstore-reconcile changes --after ID --follow`.
--
-- Ids are given in commit order, so a reader that has seen id N never later finds a smaller id
-- committed: a plain sequence would not do that (a transaction that took id 10 may commit after
-- one that took 11, and a reader already past 11 would never see 10). The trigger below takes a
-- transaction-level advisory lock before it takes an id, and holds it to the commit: writers of
-- changes commit one after another from that point on. The tool's statements take it last, when
-- every other row they write is written, so it is held for the commit alone and never waited on
-- while holding it (no deadlock with row locks).
--
-- before / after: the row's columns as JSON, times as UNIX milliseconds under the column's name
-- with `_date` replaced by `_ms` (as in app_store.run_subscription_changes), absent values left
-- out; before is NULL when the change created the row. The signed JWS is not repeated here.
-- run_id: the run whose pass made the change (NULL for a live notification); not a foreign key,
-- so that deleting old runs leaves the feed as it is.
CREATE SEQUENCE IF NOT EXISTS app_store.changes_id_seq AS bigint;

CREATE TABLE IF NOT EXISTS app_store.changes (
    id                      bigint PRIMARY KEY,
    changed_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    environment             text,
    original_transaction_id text NOT NULL,
    app_account_token       uuid,
    kind                    text NOT NULL CHECK (kind IN ('subscription', 'transaction')),
    before                  jsonb,
    after                   jsonb NOT NULL,
    cause                   text NOT NULL CHECK (cause IN ('webhook', 'history', 'repair')),
    notification_uuid       uuid,
    run_id                  uuid
);

ALTER SEQUENCE app_store.changes_id_seq OWNED BY app_store.changes.id;

CREATE INDEX IF NOT EXISTS changes_by_customer ON app_store.changes (original_transaction_id, id);
CREATE INDEX IF NOT EXISTS changes_by_account_token ON app_store.changes (app_account_token, id)
    WHERE app_account_token IS NOT NULL;

-- The commit-order id: the lock first, then the number. The key is 'appstore-reconcile.changes'
-- hashed, in the two-key space the tool's other transaction locks use.
CREATE OR REPLACE FUNCTION app_store.changes_take_id() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('appstore-reconcile.changes'), 0);
    NEW.id := nextval('app_store.changes_id_seq');
    RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS changes_take_id ON app_store.changes;
CREATE TRIGGER changes_take_id BEFORE INSERT ON app_store.changes
    FOR EACH ROW EXECUTE FUNCTION app_store.changes_take_id();

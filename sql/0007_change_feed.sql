-- appstore-reconcile ledger, migration 0007: the change feed.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- One row per change the tool makes to app_store.subscriptions or app_store.transactions,
-- written by a row trigger on those tables, so in the transaction of the change, with the row
-- exactly as it was (OLD) and as it is (NEW), whoever else wrote it in between. Every path of the
-- tool writes it: a live notification (`ingest`, cause 'webhook'), pass 1 of a run (cause
-- 'history') and pass 2 (cause 'repair'). The tool says why it writes by setting
-- app_store.change_context for its transaction (set_config(…, true)):
--     {"cause": "webhook"|"history"|"repair", "run": "<run uuid>"|null,
--      "notifications": {"subscription": {"<originalTransactionId>": "<notificationUUID>", …},
--                        "transaction": {"<transactionId>": "<notificationUUID>", …}}}
-- Writes without that setting (your own SQL, a migration's backfill) are not in the feed; a
-- webhook handler of yours that writes these tables can set it to {"cause": "webhook"} to be.
--
-- A backend follows the feed by id: `SELECT … WHERE id > $last ORDER BY id`, woken by
-- NOTIFY app_store_changes (sent once by each transaction that adds rows, with an empty payload),
-- or with `appstore-reconcile changes --after ID --follow`.
--
-- Ids are given in commit order, so a reader that has seen id N never later finds a smaller id
-- committed: a plain sequence would not do that (a transaction that took id 10 may commit after
-- one that took 11, and a reader already past 11 would never see 10). Each row takes, before its
-- id, a transaction-level advisory lock held to the commit: writers of changes commit one after
-- another from that point on. The triggers fire at the end of the statement that changed the
-- rows, when it waits for no other row; the tool writes these rows in the last statement of its
-- transactions, so the lock is held for the commit alone.
--
-- before / after: the row's columns as JSON, times as UNIX milliseconds under the column's name
-- with `_date` replaced by `_ms` (as in app_store.run_subscription_changes), absent values left
-- out, the signed JWS and the bookkeeping times (recorded_at, updated_at) not repeated; before is
-- NULL when the change created the row.
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

-- A row as the feed shows it: `times` are its timestamptz columns.
CREATE OR REPLACE FUNCTION app_store.change_row(r jsonb, times text[]) RETURNS jsonb
    LANGUAGE sql STABLE
AS $$
    SELECT jsonb_strip_nulls(jsonb_object_agg(
        CASE WHEN e.key = ANY (times) THEN regexp_replace(e.key, '_date$', '_ms') ELSE e.key END,
        CASE WHEN e.key = ANY (times) AND e.value <> 'null'::jsonb
            THEN to_jsonb(round(extract(epoch FROM (e.value #>> '{}')::timestamptz) * 1000)::bigint)
            ELSE e.value END))
    FROM jsonb_each(r - 'signed_transaction' - 'recorded_at' - 'updated_at') AS e
$$;

-- The row trigger: arguments are the kind ('subscription', 'transaction'), the key column, then
-- the table's timestamptz columns.
CREATE OR REPLACE FUNCTION app_store.record_change() RETURNS trigger
    LANGUAGE plpgsql
AS $$
DECLARE
    context jsonb := nullif(current_setting('app_store.change_context', true), '')::jsonb;
    times   text[] := TG_ARGV[2:array_upper(TG_ARGV, 1)];
    key     text;
BEGIN
    IF context IS NULL THEN
        RETURN NULL;
    END IF;
    key := to_jsonb(NEW) ->> TG_ARGV[1];
    INSERT INTO app_store.changes (environment, original_transaction_id, app_account_token, kind, before, after, cause,
        notification_uuid, run_id)
    VALUES (NEW.environment, NEW.original_transaction_id, NEW.app_account_token, TG_ARGV[0],
        CASE WHEN TG_OP = 'UPDATE' THEN app_store.change_row(to_jsonb(OLD), times) END,
        app_store.change_row(to_jsonb(NEW), times),
        context ->> 'cause', (context -> 'notifications' -> TG_ARGV[0] ->> key)::uuid, (context ->> 'run')::uuid);
    PERFORM pg_notify('app_store_changes', '');
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS record_change ON app_store.subscriptions;
CREATE TRIGGER record_change AFTER INSERT OR UPDATE ON app_store.subscriptions
    FOR EACH ROW EXECUTE FUNCTION app_store.record_change(
        'subscription', 'original_transaction_id', 'expires_date', 'grace_period_expires_date', 'last_signed_date');

DROP TRIGGER IF EXISTS record_change ON app_store.transactions;
CREATE TRIGGER record_change AFTER INSERT OR UPDATE ON app_store.transactions
    FOR EACH ROW EXECUTE FUNCTION app_store.record_change(
        'transaction', 'transaction_id', 'purchase_date', 'expires_date', 'revocation_date', 'signed_date');

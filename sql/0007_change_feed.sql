-- appstore-reconcile ledger, migration 0007: the change feed.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- One row per change the tool makes to app_store.subscriptions or app_store.transactions,
-- written by statement triggers on those tables (from their transition tables: one INSERT per
-- statement, not one per row), so in the transaction of the change, with the row exactly as it
-- was and as it is, whoever else wrote it in between. Every path of the
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
-- one that took 11, and a reader already past 11 would never see 10). The triggers take a
-- transaction-level advisory lock before the rows take their ids, held to the commit: writers of
-- changes commit one after another from that point on. (Only these triggers add rows.) They
-- fire at the end of the statement that changed the rows, when it waits for no other row; the
-- tool writes these rows in the last statement of its transactions, so the lock is held for the
-- commit alone.
--
-- before / after: the row's columns as JSON, times as UNIX milliseconds under the column's name
-- with `_date` replaced by `_ms` (as in app_store.run_subscription_changes), absent values left
-- out, the signed JWS and the bookkeeping times (recorded_at, updated_at) not repeated; before is
-- NULL when the change created the row.
-- run_id: the run whose pass made the change (NULL for a live notification); not a foreign key,
-- so that deleting old runs leaves the feed as it is.
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its triggers on transactions are made only while it is a table (0021 makes its own) (every earlier file has done its work by then). The earlier text:
-- amends checksum 39953c6c0c03c75c76fbb04df7dc58e2afb40bc51ac44e41445cf9dfbec2c6d6
CREATE SEQUENCE IF NOT EXISTS app_store.changes_id_seq AS bigint;

CREATE TABLE IF NOT EXISTS app_store.changes (
    id                      bigint PRIMARY KEY DEFAULT nextval('app_store.changes_id_seq'),
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

-- The statement triggers: arguments are the kind ('subscription', 'transaction'), the key
-- column, then the table's timestamptz columns. new_rows and old_rows are the statement's
-- transition tables (old_rows for updates only); an update never changes the key.
CREATE OR REPLACE FUNCTION app_store.record_changes() RETURNS trigger
    LANGUAGE plpgsql
AS $$
DECLARE
    context jsonb := nullif(current_setting('app_store.change_context', true), '')::jsonb;
    kind    text := TG_ARGV[0];
    key     text := TG_ARGV[1];
    times   text[] := TG_ARGV[2:array_upper(TG_ARGV, 1)];
BEGIN
    IF context IS NULL OR NOT EXISTS (SELECT 1 FROM new_rows) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('appstore-reconcile.changes'), 0);
    IF TG_OP = 'INSERT' THEN
        INSERT INTO app_store.changes (environment, original_transaction_id, app_account_token, kind, before, after, cause,
            notification_uuid, run_id)
        SELECT n.environment, n.original_transaction_id, n.app_account_token, kind, NULL, app_store.change_row(to_jsonb(n), times),
            context ->> 'cause', (context -> 'notifications' -> kind ->> (to_jsonb(n) ->> key))::uuid, (context ->> 'run')::uuid
        FROM new_rows n;
    ELSE
        INSERT INTO app_store.changes (environment, original_transaction_id, app_account_token, kind, before, after, cause,
            notification_uuid, run_id)
        SELECT n.environment, n.original_transaction_id, n.app_account_token, kind, app_store.change_row(o.r, times),
            app_store.change_row(n.r, times), context ->> 'cause', (context -> 'notifications' -> kind ->> (n.r ->> key))::uuid,
            (context ->> 'run')::uuid
        FROM (SELECT t.environment, t.original_transaction_id, t.app_account_token, to_jsonb(t) AS r FROM new_rows t) n
        JOIN (SELECT to_jsonb(t) AS r FROM old_rows t) o ON o.r ->> key = n.r ->> key;
    END IF;
    PERFORM pg_notify('app_store_changes', '');
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS record_inserts ON app_store.subscriptions;
CREATE TRIGGER record_inserts AFTER INSERT ON app_store.subscriptions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION app_store.record_changes(
        'subscription', 'original_transaction_id', 'expires_date', 'grace_period_expires_date', 'last_signed_date');
DROP TRIGGER IF EXISTS record_updates ON app_store.subscriptions;
CREATE TRIGGER record_updates AFTER UPDATE ON app_store.subscriptions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION app_store.record_changes(
        'subscription', 'original_transaction_id', 'expires_date', 'grace_period_expires_date', 'last_signed_date');

DO $$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        DROP TRIGGER IF EXISTS record_inserts ON app_store.transactions;
        CREATE TRIGGER record_inserts AFTER INSERT ON app_store.transactions
            REFERENCING NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION app_store.record_changes(
                'transaction', 'transaction_id', 'purchase_date', 'expires_date', 'revocation_date', 'signed_date');
        DROP TRIGGER IF EXISTS record_updates ON app_store.transactions;
        CREATE TRIGGER record_updates AFTER UPDATE ON app_store.transactions
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION app_store.record_changes(
                'transaction', 'transaction_id', 'purchase_date', 'expires_date', 'revocation_date', 'signed_date');
    END IF;
END
$$;

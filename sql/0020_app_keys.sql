-- appstore-reconcile ledger, migration 0020: every row keyed by its app as well as its environment.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- One deployment keeps several apps, each in Production and Sandbox: the pair (bundle ID,
-- environment) is one App Store. Every table with an environment gets `bundle_id`, which joins
-- the environment in its key, and every read and write of the tool names both. A run of one app
-- never reads, writes, locks or resumes another app's rows.
--
-- Rows recorded before this migration take their bundle ID from their stored JWS (a
-- notification's data, summary, appData or externalPurchaseToken; a transaction's own payload),
-- then from each other: subscriptions and consumption requests from their transactions or
-- notifications, accounts and members from their subscriptions. See below for what is left.
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its changes to them and its trigger generator run only while they are tables (every earlier file has done its work by then). The earlier text:
-- amends checksum f459a1524f27dcefbd7d547f19113f3ac0d87ca90cdadbe350e11ab4bd64fb2b

DO $$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        ALTER TABLE app_store.notifications ADD COLUMN IF NOT EXISTS bundle_id text;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS bundle_id text;
    END IF;
END
$$;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS bundle_id text;
ALTER TABLE app_store.accounts ADD COLUMN IF NOT EXISTS bundle_id text;
ALTER TABLE app_store.account_members ADD COLUMN IF NOT EXISTS bundle_id text;
ALTER TABLE app_store.consumption_requests ADD COLUMN IF NOT EXISTS bundle_id text;
ALTER TABLE app_store.run_checkpoints ADD COLUMN IF NOT EXISTS bundle_id text;
ALTER TABLE app_store.runs ADD COLUMN IF NOT EXISTS bundle_id text;
ALTER TABLE app_store.changes ADD COLUMN IF NOT EXISTS bundle_id text;

UPDATE app_store.notifications SET bundle_id = coalesce(
    app_store.jws_payload(signed_payload) -> 'data' ->> 'bundleId',
    app_store.jws_payload(signed_payload) -> 'summary' ->> 'bundleId',
    app_store.jws_payload(signed_payload) -> 'appData' ->> 'bundleId',
    app_store.jws_payload(signed_payload) -> 'externalPurchaseToken' ->> 'bundleId')
WHERE bundle_id IS NULL;
UPDATE app_store.transactions SET bundle_id = app_store.jws_payload(signed_transaction) ->> 'bundleId'
WHERE bundle_id IS NULL;
UPDATE app_store.transactions t SET bundle_id = (
    SELECT n.bundle_id FROM app_store.notifications n
    WHERE n.environment = t.environment AND n.transaction_id = t.transaction_id AND n.bundle_id IS NOT NULL LIMIT 1)
WHERE t.bundle_id IS NULL;
UPDATE app_store.subscriptions s SET bundle_id = coalesce(
    (SELECT t.bundle_id FROM app_store.transactions t
     WHERE t.environment = s.environment AND t.original_transaction_id = s.original_transaction_id AND t.bundle_id IS NOT NULL LIMIT 1),
    (SELECT n.bundle_id FROM app_store.notifications n
     WHERE n.environment = s.environment AND n.original_transaction_id = s.original_transaction_id AND n.bundle_id IS NOT NULL LIMIT 1))
WHERE s.bundle_id IS NULL;
UPDATE app_store.consumption_requests c SET bundle_id = (
    SELECT n.bundle_id FROM app_store.notifications n WHERE n.notification_uuid = c.notification_uuid)
WHERE c.bundle_id IS NULL;
UPDATE app_store.account_members m SET bundle_id = coalesce(
    (SELECT s.bundle_id FROM app_store.subscriptions s
     WHERE s.environment = m.environment AND s.original_transaction_id = m.original_transaction_id ORDER BY s.bundle_id LIMIT 1),
    (SELECT t.bundle_id FROM app_store.transactions t
     WHERE t.environment = m.environment AND t.original_transaction_id = m.original_transaction_id LIMIT 1))
WHERE m.bundle_id IS NULL;
UPDATE app_store.accounts a SET bundle_id = (
    SELECT m.bundle_id FROM app_store.account_members m
    WHERE m.environment = a.environment AND m.account_id = a.account_id AND m.bundle_id IS NOT NULL LIMIT 1)
WHERE a.bundle_id IS NULL;
UPDATE app_store.changes c SET bundle_id = coalesce(
    (SELECT s.bundle_id FROM app_store.subscriptions s
     WHERE s.environment = c.environment AND s.original_transaction_id = c.original_transaction_id ORDER BY s.bundle_id LIMIT 1),
    (SELECT t.bundle_id FROM app_store.transactions t
     WHERE t.environment = c.environment AND t.original_transaction_id = c.original_transaction_id LIMIT 1))
WHERE c.bundle_id IS NULL;

-- What is left (a row whose stored JWS names no app and none of whose related rows does; the
-- tool never wrote such a row, since every payload it verified names its app) takes the ledger's
-- one app when it holds exactly one, else '' (no configured app reads it; a NOTICE counts them).
-- Checkpoints and runs carry no payload: they take the ledger's one app the same way, and
-- otherwise a checkpoint is deleted (a rerun pages its window again) and a run keeps NULL.
DO $$
DECLARE
    apps text[];
    spec record;
    missing bigint;
BEGIN
    SELECT array_agg(DISTINCT bundle_id) INTO apps FROM (
        SELECT bundle_id FROM app_store.transactions UNION SELECT bundle_id FROM app_store.notifications) found
    WHERE bundle_id IS NOT NULL AND bundle_id <> '';
    FOR spec IN SELECT * FROM (VALUES ('notifications'), ('transactions'), ('subscriptions'), ('consumption_requests'),
            ('account_members'), ('accounts'), ('changes')) AS s(tbl)
    LOOP
        EXECUTE format('UPDATE app_store.%I SET bundle_id = $1 WHERE bundle_id IS NULL', spec.tbl)
            USING CASE WHEN coalesce(array_length(apps, 1), 0) = 1 THEN apps[1] ELSE '' END;
        GET DIAGNOSTICS missing = ROW_COUNT;
        IF missing > 0 THEN
            RAISE NOTICE '% rows of app_store.% name no app in their payloads or related rows: bundle_id set to %', missing, spec.tbl,
                CASE WHEN coalesce(array_length(apps, 1), 0) = 1 THEN 'the ledger''s one app, ' || apps[1] ELSE 'the empty string' END;
        END IF;
    END LOOP;
    IF coalesce(array_length(apps, 1), 0) = 1 THEN
        UPDATE app_store.run_checkpoints SET bundle_id = apps[1] WHERE bundle_id IS NULL;
        UPDATE app_store.runs SET bundle_id = apps[1] WHERE bundle_id IS NULL;
    END IF;
    DELETE FROM app_store.run_checkpoints WHERE bundle_id IS NULL;
END
$$;

DO $$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        ALTER TABLE app_store.notifications ALTER COLUMN bundle_id SET NOT NULL;
        ALTER TABLE app_store.transactions ALTER COLUMN bundle_id SET NOT NULL;
    END IF;
END
$$;
ALTER TABLE app_store.subscriptions ALTER COLUMN bundle_id SET NOT NULL;
ALTER TABLE app_store.accounts ALTER COLUMN bundle_id SET NOT NULL;
ALTER TABLE app_store.account_members ALTER COLUMN bundle_id SET NOT NULL;
ALTER TABLE app_store.consumption_requests ALTER COLUMN bundle_id SET NOT NULL;
ALTER TABLE app_store.run_checkpoints ALTER COLUMN bundle_id SET NOT NULL;

-- The keys, once: a second run finds bundle_id already in them.
DO $$
DECLARE
    spec record;
BEGIN
    FOR spec IN SELECT * FROM (VALUES
            ((CASE WHEN to_regclass('app_store.notification_rows') IS NULL THEN 'transactions' ELSE 'transaction_rows' END), 'bundle_id, environment, transaction_id'),
            ('subscriptions', 'bundle_id, environment, original_transaction_id'),
            ('accounts', 'bundle_id, environment, account_id'),
            ('account_members', 'bundle_id, environment, original_transaction_id'),
            ('run_checkpoints', 'bundle_id, environment, window_start, window_end, only_failures, shard, query')) AS s(tbl, columns)
    LOOP
        IF NOT EXISTS (
            SELECT 1 FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
            WHERE c.conrelid = ('app_store.' || spec.tbl)::regclass AND c.contype = 'p' AND a.attname = 'bundle_id'
        ) THEN
            EXECUTE format('ALTER TABLE app_store.%I DROP CONSTRAINT %I', spec.tbl, spec.tbl || '_pkey');
            EXECUTE format('ALTER TABLE app_store.%I ADD CONSTRAINT %I PRIMARY KEY (%s)', spec.tbl, spec.tbl || '_pkey', spec.columns);
        END IF;
    END LOOP;
END
$$;
DROP INDEX IF EXISTS app_store.account_members_account_idx;
CREATE INDEX IF NOT EXISTS account_members_account_idx ON app_store.account_members (bundle_id, environment, account_id);
-- A customer's transactions are found by transactions_customer_idx (0001), which leads with the
-- originalTransactionId; 0005's index on (environment, original_transaction_id) is one more write
-- on every transaction for no lookup it serves better.
DROP INDEX IF EXISTS app_store.transactions_environment_customer_idx;
CREATE INDEX IF NOT EXISTS runs_app_kind_finished_idx ON app_store.runs (bundle_id, environment, kind, outcome, finished_at);

-- The entitlements view: bundle_id added as its last column (the earlier columns keep their
-- order), and a refund matched within the app.
CREATE OR REPLACE VIEW app_store.entitlements AS
SELECT s.environment, s.app_account_token, s.original_transaction_id, s.product_id,
       'Auto-Renewable Subscription'::text AS product_type,
       s.subscription_group_identifier, s.in_app_ownership_type, s.expires_date, s.status, s.bundle_id
FROM app_store.subscriptions s
WHERE (s.status = 1 AND (s.expires_date IS NULL OR s.expires_date > now()))
   OR (s.status = 4 AND (s.grace_period_expires_date IS NULL OR s.grace_period_expires_date > now()))
UNION ALL
SELECT t.environment, t.app_account_token, t.original_transaction_id, t.product_id, t.product_type,
       t.subscription_group_identifier, t.in_app_ownership_type, NULL::timestamptz AS expires_date,
       NULL::smallint AS status, t.bundle_id
FROM app_store.transactions t
WHERE t.product_type = 'Non-Consumable'
  AND NOT EXISTS (
      SELECT 1 FROM app_store.transactions r
      WHERE r.bundle_id = t.bundle_id AND r.environment = t.environment
        AND r.original_transaction_id = t.original_transaction_id
        AND r.revocation_date IS NOT NULL)
  AND NOT EXISTS (
      SELECT 1 FROM app_store.transactions n
      WHERE n.bundle_id = t.bundle_id AND n.environment = t.environment
        AND n.original_transaction_id = t.original_transaction_id
        AND n.product_type = 'Non-Consumable'
        AND (n.signed_date, n.transaction_id) > (t.signed_date, t.transaction_id));

-- The change feed: each change names its app, and a row is matched with its old version by app,
-- environment and key. Otherwise as migration 0015 wrote the triggers.
CREATE OR REPLACE FUNCTION app_store.create_change_triggers() RETURNS void
    LANGUAGE plpgsql
AS $generator$
DECLARE
    spec record;
BEGIN
    FOR spec IN
        SELECT * FROM (VALUES
            ('subscription', 'subscriptions', 'original_transaction_id',
                '(context -> ''notifications'' -> ''subscription'' ->> n.original_transaction_id::text)::uuid'),
            ('transaction', 'transactions', 'transaction_id',
                '(context -> ''notifications'' -> ''transaction'' ->> n.transaction_id::text)::uuid'),
            ('consumption_request', 'consumption_requests', 'notification_uuid', 'n.notification_uuid')
        ) AS s(kind, tbl, key, notification)
    LOOP
        EXECUTE format(
            $function$
            CREATE OR REPLACE FUNCTION app_store.record_%1$s_changes() RETURNS trigger
                LANGUAGE plpgsql
            AS $body$
            DECLARE
                context jsonb := nullif(current_setting('app_store.change_context', true), '')::jsonb;
                fed bigint;
            BEGIN
                IF context IS NULL OR NOT EXISTS (SELECT 1 FROM new_rows) THEN
                    RETURN NULL;
                END IF;
                PERFORM pg_advisory_xact_lock(hashtext('appstore-reconcile.changes'), 0);
                IF TG_OP = 'INSERT' THEN
                    INSERT INTO app_store.changes (bundle_id, environment, original_transaction_id, app_account_token, kind, before, after,
                        cause, notification_uuid, run_id)
                    SELECT n.bundle_id, n.environment, n.original_transaction_id, n.app_account_token, %1$L, NULL, %4$s,
                        context ->> 'cause', %6$s, (context ->> 'run')::uuid
                    FROM new_rows n;
                ELSE
                    INSERT INTO app_store.changes (bundle_id, environment, original_transaction_id, app_account_token, kind, before, after,
                        cause, notification_uuid, run_id)
                    SELECT c.bundle_id, c.environment, c.original_transaction_id, c.app_account_token, %1$L, c.before, c.after,
                        context ->> 'cause', c.notification_uuid, (context ->> 'run')::uuid
                    FROM (
                        SELECT n.bundle_id, n.environment, n.original_transaction_id, n.app_account_token, %5$s AS before, %4$s AS after,
                            %6$s AS notification_uuid
                        FROM new_rows n JOIN old_rows o ON o.bundle_id = n.bundle_id AND o.environment = n.environment AND o.%3$I = n.%3$I
                    ) c
                    WHERE c.before - 'signed_ms' - 'last_signed_ms' IS DISTINCT FROM c.after - 'signed_ms' - 'last_signed_ms';
                END IF;
                GET DIAGNOSTICS fed = ROW_COUNT;
                IF fed > 0 THEN
                    PERFORM pg_notify('app_store_changes', '');
                END IF;
                RETURN NULL;
            END;
            $body$
            $function$,
            spec.kind, spec.tbl, spec.key,
            app_store.change_row_sql(('app_store.' || spec.tbl)::regclass, 'n'),
            app_store.change_row_sql(('app_store.' || spec.tbl)::regclass, 'o'),
            spec.notification);
        EXECUTE format('DROP TRIGGER IF EXISTS record_inserts ON app_store.%I', spec.tbl);
        EXECUTE format(
            'CREATE TRIGGER record_inserts AFTER INSERT ON app_store.%I REFERENCING NEW TABLE AS new_rows '
            'FOR EACH STATEMENT EXECUTE FUNCTION app_store.record_%s_changes()', spec.tbl, spec.kind);
        EXECUTE format('DROP TRIGGER IF EXISTS record_updates ON app_store.%I', spec.tbl);
        EXECUTE format(
            'CREATE TRIGGER record_updates AFTER UPDATE ON app_store.%I REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows '
            'FOR EACH STATEMENT EXECUTE FUNCTION app_store.record_%s_changes()', spec.tbl, spec.kind);
    END LOOP;
END;
$generator$;

SELECT app_store.create_change_triggers() WHERE to_regclass('app_store.notification_rows') IS NULL;

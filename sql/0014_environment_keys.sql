-- appstore-reconcile ledger, migration 0014: transactions and subscriptions keyed by environment.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- Production and Sandbox are two App Stores: the same transaction ID or originalTransactionId
-- may come from both, and a row of one must never be overwritten by the other's. Until this
-- migration app_store.transactions was keyed by transaction_id and app_store.subscriptions by
-- original_transaction_id, so a Sandbox notification could overwrite a Production row (or be
-- ignored because of it). From here their keys are (environment, transaction_id) and
-- (environment, original_transaction_id), environment is required, and every upsert, read and
-- NOT EXISTS check of the tool names the environment.
--
-- Rows recorded without an environment take it from their stored JWS (every signed transaction
-- carries it), else from their transactions or notifications. A row whose environment cannot be
-- found stops the migration with a message, and nothing is changed: set the row's environment
-- (Production or Sandbox) and run `migrate` again.
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its changes to transactions are made only while it is a table (every earlier file has done its work by then). The earlier text:
-- amends checksum 708c0cf63e8b1e1bc63e8a164c0eb0ee4beae9f38dc8cda76e24afc5cc8ef5a8

UPDATE app_store.transactions SET environment = app_store.jws_payload(signed_transaction) ->> 'environment'
WHERE environment IS NULL;
UPDATE app_store.transactions t SET environment = (
    SELECT n.environment FROM app_store.notifications n
    WHERE n.transaction_id = t.transaction_id AND n.environment IS NOT NULL LIMIT 1)
WHERE t.environment IS NULL;
UPDATE app_store.subscriptions s SET environment = coalesce(
    (SELECT t.environment FROM app_store.transactions t
     WHERE t.original_transaction_id = s.original_transaction_id AND t.environment IS NOT NULL LIMIT 1),
    (SELECT n.environment FROM app_store.notifications n
     WHERE n.original_transaction_id = s.original_transaction_id AND n.environment IS NOT NULL LIMIT 1))
WHERE s.environment IS NULL;

DO $$
DECLARE
    missing bigint;
BEGIN
    SELECT count(*) INTO missing FROM app_store.transactions WHERE environment IS NULL;
    IF missing > 0 THEN
        RAISE EXCEPTION '% rows of app_store.transactions have no environment and none could be found in their payloads or notifications', missing
            USING HINT = 'Set their environment column to Production or Sandbox, then run migrate again.';
    END IF;
    SELECT count(*) INTO missing FROM app_store.subscriptions WHERE environment IS NULL;
    IF missing > 0 THEN
        RAISE EXCEPTION '% rows of app_store.subscriptions have no environment and none could be found in their transactions or notifications', missing
            USING HINT = 'Set their environment column to Production or Sandbox, then run migrate again.';
    END IF;
END
$$;

DO $$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        ALTER TABLE app_store.transactions ALTER COLUMN environment SET NOT NULL;
    END IF;
END
$$;
ALTER TABLE app_store.subscriptions ALTER COLUMN environment SET NOT NULL;

-- The primary keys, once: a second run finds environment already in them.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
        WHERE c.conrelid = 'app_store.transactions'::regclass AND c.contype = 'p' AND a.attname = 'environment'
    ) AND to_regclass('app_store.notification_rows') IS NULL THEN
        ALTER TABLE app_store.transactions DROP CONSTRAINT transactions_pkey;
        ALTER TABLE app_store.transactions ADD CONSTRAINT transactions_pkey PRIMARY KEY (environment, transaction_id);
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
        WHERE c.conrelid = 'app_store.subscriptions'::regclass AND c.contype = 'p' AND a.attname = 'environment'
    ) THEN
        ALTER TABLE app_store.subscriptions DROP CONSTRAINT subscriptions_pkey;
        ALTER TABLE app_store.subscriptions ADD CONSTRAINT subscriptions_pkey PRIMARY KEY (environment, original_transaction_id);
    END IF;
END
$$;
-- 0005's index on (environment, original_transaction_id) is the subscriptions' key now.
DROP INDEX IF EXISTS app_store.subscriptions_environment_idx;

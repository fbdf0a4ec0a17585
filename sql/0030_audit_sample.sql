-- appstore-reconcile ledger, migration 0030: a sample key on every subscription, for `audit`.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- Issue 64, point 2. `audit` asks Apple about a uniformly random sample of one App Store's
-- subscriptions, without reading the ledger whole: each row gets a distinct key, in the order rows
-- are inserted, and the sampler draws keys uniformly from the keys' range and keeps those a row of
-- the App Store holds (Decisions' AuditSampler: rejection sampling, exact; one index lookup a
-- probe). The index is on the key alone: one led by (bundle_id, environment) was taken by the
-- planner, in a ledger not yet analyzed, for the lookups by originalTransactionId the primary key
-- serves. The key says nothing about the row: it is left out of the change feed. Adding the column
-- rewrites the table once (its default is volatile), giving every existing row its key.

CREATE SEQUENCE IF NOT EXISTS app_store.subscription_sample_key;
ALTER TABLE app_store.subscriptions
    ADD COLUMN IF NOT EXISTS sample_key bigint NOT NULL DEFAULT nextval('app_store.subscription_sample_key');
ALTER SEQUENCE app_store.subscription_sample_key OWNED BY app_store.subscriptions.sample_key;
CREATE UNIQUE INDEX IF NOT EXISTS subscriptions_sample_key_idx ON app_store.subscriptions (sample_key);

-- 0029's row text, with the sample key left out too.
CREATE OR REPLACE FUNCTION app_store.change_row_sql(tbl regclass, alias text) RETURNS text
    LANGUAGE sql STABLE
AS $$
    SELECT 'jsonb_strip_nulls(' || string_agg(object, ' || ' ORDER BY part) || ')'
    FROM (
        SELECT part, 'jsonb_build_object(' || string_agg(pair, ', ' ORDER BY attnum) || ')' AS object
        FROM (
            SELECT attnum, (row_number() OVER (ORDER BY attnum) - 1) / 40 AS part,
                CASE WHEN atttypid = 'timestamptz'::regtype
                    THEN format('%L, round(extract(epoch FROM %I.%I) * 1000)::bigint', regexp_replace(attname, '_date$', '_ms'), alias, attname)
                    ELSE format('%L, %I.%I', attname, alias, attname)
                END AS pair
            FROM pg_attribute
            WHERE attrelid = tbl AND attnum > 0 AND NOT attisdropped
                AND attname NOT IN ('signed_transaction', 'signed_transaction_key', 'recorded_at', 'updated_at', 'renewal_signed_date',
                    'due_at', 'expected', 'sample_key')
        ) pairs
        GROUP BY part
    ) objects
$$;

SELECT app_store.create_change_triggers();

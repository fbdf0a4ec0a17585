-- appstore-reconcile ledger, migration 0029: what Apple owes each subscription, and by when.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- Issue 64, point 1. Every subscription tells when Apple must next say something about it: an
-- active one renewing automatically a DID_RENEW, DID_FAIL_TO_RENEW or EXPIRED by its expiry
-- (`expected` 'renewal_or_failure'); one whose auto-renew is off an EXPIRED by its expiry
-- ('expiry'); one in billing grace its outcome by the grace period's end ('grace_outcome'); one in
-- billing retry its outcome by the end of Apple's retrying, 60 days after the expiry
-- ('retry_outcome'). The rule is Decisions' SubscriptionDue, not SQL: the tool's one writer of
-- this table stores `due_at` and `expected` with every row it writes (a timestamptz plus an
-- interval is only STABLE in PostgreSQL, so no generated column could hold it), and `migrate`
-- fills the rows written before this migration, in batches, after it (`DueBackfill`). Expired
-- and revoked subscriptions owe nothing: both columns are NULL.

ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS due_at timestamptz;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS expected text;

-- The overdue ones, whatever the ledger's size: a range scan of the rows whose due time passed.
CREATE INDEX IF NOT EXISTS subscriptions_due_idx ON app_store.subscriptions (due_at) WHERE due_at IS NOT NULL;

-- The change feed records what a row says, not what the tool derives from it: 0021's row text,
-- with the two derived columns left out.
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
                    'due_at', 'expected')
        ) pairs
        GROUP BY part
    ) objects
$$;

SELECT app_store.create_change_triggers();

-- How long past its due time a notification counts as overdue: the session's (or the role's, or
-- the database's) `app_store.overdue_after` setting, else the configuration's default, an hour
-- (ALTER DATABASE … SET app_store.overdue_after = '2 hours' to match a configured `overdueAfter`).
CREATE OR REPLACE FUNCTION app_store.overdue_after() RETURNS interval
    LANGUAGE sql STABLE
AS $$
    SELECT coalesce(nullif(current_setting('app_store.overdue_after', true), '')::interval, interval '1 hour')
$$;

-- The subscriptions Apple owes a notification whose due time passed more than overdue_after()
-- ago, with nothing recorded since (a notification that moves the state moves `due_at`) and the
-- account not verified against Apple since. The tool's own reads (serve's gauge, `status`, pass
-- 2) ask the same with their clock and the configured `overdueAfter`.
CREATE OR REPLACE VIEW app_store.overdue_subscriptions AS
SELECT s.bundle_id, s.environment, s.original_transaction_id, s.expected, s.due_at, now() - s.due_at AS overdue_by
FROM app_store.subscriptions s
LEFT JOIN app_store.account_members m
    ON m.bundle_id = s.bundle_id AND m.environment = s.environment AND m.original_transaction_id = s.original_transaction_id
LEFT JOIN app_store.accounts a ON a.bundle_id = m.bundle_id AND a.environment = m.environment AND a.account_id = m.account_id
WHERE s.due_at < now() - app_store.overdue_after()
    AND (a.verified_at IS NULL OR a.verified_at < s.due_at + app_store.overdue_after());

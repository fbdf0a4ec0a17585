-- appstore-reconcile ledger, migration 0019: renewal info has its own signing time.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- A subscription row is as of its latest notification (last_signed_date), and a notification
-- signed earlier changes nothing. But not every notification carries renewal info: when the
-- latest had none, the row's renewal fields (auto_renew_status and the rest) are older than the
-- row, and an earlier notification that arrives late may carry newer ones (auto-renew turned off
-- between the two). renewal_signed_date is when Apple signed the renewal info the row's renewal
-- fields came from; such a notification now updates those fields (and only those), and renewal
-- info signed before it never replaces them. NULL in rows written before this migration: the
-- tool then takes the row's renewal info to be as of last_signed_date, as it did until now.
--
-- Adding a nullable column without a default rewrites nothing: the table lock is brief (migrate
-- waits for it at most lock_timeout). Like last_signed_date, it is bookkeeping, not content:
-- the change feed leaves it out of a row's form, so re-signed renewal info that says the same is
-- no change.
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its trigger generator runs only while transactions is a table (0021's runs after it) (every earlier file has done its work by then). The earlier text:
-- amends checksum 6d71140697a2d87f64a30e2d2d1a6ff48cf2dcea18dadd65e9a6ad27542f3a11
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS renewal_signed_date timestamptz;

-- 0010's function, with renewal_signed_date left out of the feed's form of a row.
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
                AND attname NOT IN ('signed_transaction', 'recorded_at', 'updated_at', 'renewal_signed_date')
        ) pairs
        GROUP BY part
    ) objects
$$;

SELECT app_store.create_change_triggers() WHERE to_regclass('app_store.notification_rows') IS NULL;

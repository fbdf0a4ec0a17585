-- appstore-reconcile ledger, migration 0010: the change feed's triggers, one function per table.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- 0007's trigger function served both tables, so it turned each changed row into JSON whole
-- (to_jsonb: the stored signed transaction included, read back from TOAST and escaped), then
-- took columns out and rewrote the time columns one by one, each step a new jsonb value (0009).
-- Under `serve`'s load that was still about a third of PostgreSQL's CPU. The functions written
-- here build the feed's form of a row in one jsonb_build_object over the table's own columns:
-- every column but the stored JWS and the bookkeeping times (recorded_at, updated_at),
-- timestamptz columns as UNIX milliseconds under the column's name with `_date` replaced by
-- `_ms`, absent values left out. The rows in app_store.changes are the same as 0007's; what 0007
-- says of the commit-order lock, the context and NOTIFY holds unchanged.
--
-- The column lists are read from the catalog when app_store.create_change_triggers() runs and
-- are fixed in the functions it writes. So after any ALTER TABLE of app_store.subscriptions or
-- app_store.transactions (a later migration's, or your own: a column added, dropped, renamed or
-- retyped), run SELECT app_store.create_change_triggers(): until then an added column is not in
-- the feed, and a dropped or renamed one makes every write to that table fail.
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its trigger generator runs only while transactions is a table (0021's runs after it) (every earlier file has done its work by then). The earlier text:
-- amends checksum 76593e660c2e8bc82d227cd17e706979860173f4340bbf1a58229c6bb288d857

-- The feed's form of a row, as SQL over the row's alias (`n` or `o`): the table's columns at the
-- time of the call. jsonb_build_object takes at most 100 arguments, so the pairs go 40 to an
-- object, and the objects are joined with ||.
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
                AND attname NOT IN ('signed_transaction', 'recorded_at', 'updated_at')
        ) pairs
        GROUP BY part
    ) objects
$$;

-- Writes app_store.record_subscription_changes() and app_store.record_transaction_changes() from
-- the catalog and points the tables' statement triggers at them.
CREATE OR REPLACE FUNCTION app_store.create_change_triggers() RETURNS void
    LANGUAGE plpgsql
AS $generator$
DECLARE
    spec record;
BEGIN
    FOR spec IN
        SELECT * FROM (VALUES ('subscription', 'subscriptions', 'original_transaction_id'),
                              ('transaction', 'transactions', 'transaction_id')) AS s(kind, tbl, key)
    LOOP
        EXECUTE format(
            $function$
            CREATE OR REPLACE FUNCTION app_store.record_%1$s_changes() RETURNS trigger
                LANGUAGE plpgsql
            AS $body$
            DECLARE
                context jsonb := nullif(current_setting('app_store.change_context', true), '')::jsonb;
            BEGIN
                IF context IS NULL OR NOT EXISTS (SELECT 1 FROM new_rows) THEN
                    RETURN NULL;
                END IF;
                PERFORM pg_advisory_xact_lock(hashtext('appstore-reconcile.changes'), 0);
                IF TG_OP = 'INSERT' THEN
                    INSERT INTO app_store.changes (environment, original_transaction_id, app_account_token, kind, before, after,
                        cause, notification_uuid, run_id)
                    SELECT n.environment, n.original_transaction_id, n.app_account_token, %1$L, NULL, %4$s,
                        context ->> 'cause', (context -> 'notifications' -> %1$L ->> n.%3$I::text)::uuid, (context ->> 'run')::uuid
                    FROM new_rows n;
                ELSE
                    INSERT INTO app_store.changes (environment, original_transaction_id, app_account_token, kind, before, after,
                        cause, notification_uuid, run_id)
                    SELECT n.environment, n.original_transaction_id, n.app_account_token, %1$L, %5$s, %4$s,
                        context ->> 'cause', (context -> 'notifications' -> %1$L ->> n.%3$I::text)::uuid, (context ->> 'run')::uuid
                    FROM new_rows n JOIN old_rows o ON o.%3$I = n.%3$I;
                END IF;
                PERFORM pg_notify('app_store_changes', '');
                RETURN NULL;
            END;
            $body$
            $function$,
            spec.kind, spec.tbl, spec.key,
            app_store.change_row_sql(('app_store.' || spec.tbl)::regclass, 'n'),
            app_store.change_row_sql(('app_store.' || spec.tbl)::regclass, 'o'));
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

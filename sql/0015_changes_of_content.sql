-- appstore-reconcile ledger, migration 0015: the change feed reports what a row says, not when
-- Apple signed it. Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- Apple signs every notification anew, so most notifications carry a transaction (and often a
-- subscription) that says exactly what the ledger already holds, signed later. The ledger keeps
-- that later signing time (transactions.signed_date, subscriptions.last_signed_date: the ordering
-- guard, so that a version signed in between is known to be older), but the row's content has
-- not changed and the feed must not say it has. From this migration:
--   * the tool's upserts move only the signing time in that case: the stored JWS stays the one
--     that first said the content, and updated_at stays the time the content last changed;
--   * the feed's update triggers leave out every updated row whose feed form, the signing time
--     aside (signed_ms, last_signed_ms), is the same before and after, whoever wrote it.
-- An INSERT is always a change. A row and its old version are matched by environment and key
-- (migration 0014 keys the tables by environment). The rest of 0010's and 0011's notes hold unchanged: run
-- SELECT app_store.create_change_triggers() again after altering one of the three tables.
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its trigger generator runs only while transactions is a table (0021's runs after it) (every earlier file has done its work by then). The earlier text:
-- amends checksum d6f93793adb850d9a0f03f0d38eb3867c812806259fa504d8d977f3f11dd9e04

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
                    INSERT INTO app_store.changes (environment, original_transaction_id, app_account_token, kind, before, after,
                        cause, notification_uuid, run_id)
                    SELECT n.environment, n.original_transaction_id, n.app_account_token, %1$L, NULL, %4$s,
                        context ->> 'cause', %6$s, (context ->> 'run')::uuid
                    FROM new_rows n;
                ELSE
                    INSERT INTO app_store.changes (environment, original_transaction_id, app_account_token, kind, before, after,
                        cause, notification_uuid, run_id)
                    SELECT c.environment, c.original_transaction_id, c.app_account_token, %1$L, c.before, c.after,
                        context ->> 'cause', c.notification_uuid, (context ->> 'run')::uuid
                    FROM (
                        SELECT n.environment, n.original_transaction_id, n.app_account_token, %5$s AS before, %4$s AS after,
                            %6$s AS notification_uuid
                        FROM new_rows n JOIN old_rows o ON o.environment = n.environment AND o.%3$I = n.%3$I
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

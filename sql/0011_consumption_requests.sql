-- appstore-reconcile ledger, migration 0011: refund requests to answer (CONSUMPTION_REQUEST).
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- A CONSUMPTION_REQUEST says a customer asked Apple for a refund; Apple asks the app for
-- consumption information (Send Consumption Information,
-- PUT /inApps/v2/transactions/consumption/{transactionId}) and its page says: "Respond within
-- 12 hours of receiving the CONSUMPTION_REQUEST notification"
-- (https://developer.apple.com/documentation/appstoreserverapi/send-consumption-information).
-- Every CONSUMPTION_REQUEST the ledger records, live (`serve`, `ingest`) or recovered (`run`,
-- `nightly`, `consumption-requests`), gets a row here in the same transaction, and a change-feed
-- row of kind 'consumption_request'. Answering Apple is the team's business: its code sets
-- answered_date when it has (the tool never writes that column).
--
--   sent_date      when Apple sent the notification: its first send attempt as Get Notification
--                  History records it, else (a live delivery, which is that attempt) its signedDate;
--   deadline_date  sent_date + 12 hours;
--   reason         data.consumptionRequestReason (UNINTENDED_PURCHASE, FULFILLMENT_ISSUE, …).
--
-- Amended after migration 0014 keyed transactions by environment: the backfill takes product and
-- token from the transaction of the request's own environment, so that running this file again
-- never mixes the two. A ledger that applied the earlier text keeps it:
-- amends checksum 0d27cf367707a6c821d734f4d872a57438a1ab3b12a2265ce41776d5b71f94c7
-- Amended again after migration 0020 added bundle_id (NOT NULL) to the requests: the backfill
-- leaves out requests already recorded, which a NOT NULL check would refuse before ON CONFLICT
-- could skip them. What it writes on a ledger that has none is unchanged:
-- amends checksum 88356623eebfd6de4e24e1dcda11651a12aac13bfa790cae1411a5d5c75a7da3
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its trigger generator runs only while transactions is a table (0021's runs after it) (every earlier file has done its work by then). The earlier text:
-- amends checksum 4d83a0caa4b8b9df7c3f1b86a4739496f41f7dde861c1c43d158e6108d34ad9f
CREATE TABLE IF NOT EXISTS app_store.consumption_requests (
    notification_uuid       uuid PRIMARY KEY,
    environment             text NOT NULL,
    original_transaction_id text NOT NULL,
    transaction_id          text,
    product_id              text,
    app_account_token       uuid,
    reason                  text,
    sent_date               timestamptz NOT NULL,
    deadline_date           timestamptz NOT NULL,
    answered_date           timestamptz,
    recorded_at             timestamptz NOT NULL DEFAULT now()
);

-- What is still to answer, soonest first: WHERE answered_date IS NULL ORDER BY deadline_date.
CREATE INDEX IF NOT EXISTS consumption_requests_unanswered
    ON app_store.consumption_requests (deadline_date) WHERE answered_date IS NULL;

-- Refund requests the ledger recorded before this migration, so that none of the last 12 hours is
-- lost: sent_date is their signedDate (the ledger does not keep Apple's send attempts), the token
-- and product their transaction's. A migration's writes are not in the change feed (0007).
INSERT INTO app_store.consumption_requests (notification_uuid, environment, original_transaction_id, transaction_id, product_id,
    app_account_token, sent_date, deadline_date)
SELECT n.notification_uuid, coalesce(n.environment, ''), n.original_transaction_id, n.transaction_id, t.product_id, t.app_account_token,
    n.signed_date, n.signed_date + interval '12 hours'
FROM app_store.notifications n
LEFT JOIN app_store.transactions t ON t.transaction_id = n.transaction_id
    AND (t.environment IS NULL OR t.environment = n.environment)
WHERE n.notification_type = 'CONSUMPTION_REQUEST' AND n.original_transaction_id IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM app_store.consumption_requests c WHERE c.notification_uuid = n.notification_uuid)
ON CONFLICT (notification_uuid) DO NOTHING;

-- The feed takes a third kind. NOT VALID, and no VALIDATE: the migration runs in one transaction,
-- so a VALIDATE would scan the whole feed under the lock DROP/ADD CONSTRAINT holds, and every
-- writer's trigger would wait for it. Every existing row passed the narrower check; new rows are
-- checked as they come.
ALTER TABLE app_store.changes DROP CONSTRAINT IF EXISTS changes_kind_check;
ALTER TABLE app_store.changes ADD CONSTRAINT changes_kind_check
    CHECK (kind IN ('subscription', 'transaction', 'consumption_request')) NOT VALID;

-- 0010's generator, with the third table. A consumption request's row names its notification
-- itself; the other tables' rows find theirs in the change context, as before.
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
                    SELECT n.environment, n.original_transaction_id, n.app_account_token, %1$L, %5$s, %4$s,
                        context ->> 'cause', %6$s, (context ->> 'run')::uuid
                    FROM new_rows n JOIN old_rows o ON o.%3$I = n.%3$I;
                END IF;
                PERFORM pg_notify('app_store_changes', '');
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

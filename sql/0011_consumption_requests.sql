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

-- The feed takes a third kind. NOT VALID, then VALIDATE: adding the constraint does not hold a
-- lock that stops writers while the table is scanned (every existing row passed the narrower one).
ALTER TABLE app_store.changes DROP CONSTRAINT IF EXISTS changes_kind_check;
ALTER TABLE app_store.changes ADD CONSTRAINT changes_kind_check
    CHECK (kind IN ('subscription', 'transaction', 'consumption_request')) NOT VALID;
ALTER TABLE app_store.changes VALIDATE CONSTRAINT changes_kind_check;

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

SELECT app_store.create_change_triggers();

-- appstore-reconcile ledger, migration 0027: a refund request's deadline is its latest request's.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- While a refund request is open Apple asks again every few hours (developer forum thread 756151;
-- developers report about 8 h apart), each time a new CONSUMPTION_REQUEST that Apple's page says
-- to answer within 12 hours. Until this migration an episode's row kept its first request's
-- deadline, so after an outage longer than 12 hours nothing was ever answerable (issue 62). Now
-- the row of an episode (still the first request's notification_uuid, as 0022 keeps it) carries:
--
--   first_sent_date  the first request's sent_date (when Apple first asked)
--   sent_date        the latest request's sent_date (the one Apple waits on now)
--   deadline_date    the latest request's deadline: its sent_date + 12 hours
--
-- so that the deadline gauge, its alert, the reports and the answering pass follow the latest.

ALTER TABLE app_store.consumption_requests ADD COLUMN IF NOT EXISTS first_sent_date timestamptz;
-- The change feed's rows of consumption_requests name their columns: made again with the new one.
SELECT app_store.create_change_triggers();

CREATE OR REPLACE FUNCTION app_store.settle_consumption_requests(p_bundle_id text, p_environment text, p_transactions text[])
    RETURNS void
    LANGUAGE sql
AS $$
    WITH events AS (
        SELECT * FROM app_store.refund_request_events
        WHERE bundle_id = p_bundle_id AND environment = p_environment AND transaction_id = ANY(p_transactions)
    ), numbered AS (
        -- A request's episode: the decisions signed before it (one signed in the same millisecond
        -- counts after it).
        SELECT e.*, sum((e.kind = 'decision')::int) OVER (
            PARTITION BY e.transaction_id ORDER BY e.signed_date, e.kind = 'decision', e.notification_uuid ROWS UNBOUNDED PRECEDING
        ) AS episode
        FROM events e
    ), requests AS (
        SELECT * FROM numbered WHERE kind = 'request'
    ), firsts AS (
        SELECT DISTINCT ON (transaction_id, episode) * FROM requests
        ORDER BY transaction_id, episode, sent_date, signed_date, notification_uuid
    ), latest AS (
        -- The episode's latest request: what Apple waits on now (ConsumptionDeadline.episode).
        SELECT DISTINCT ON (transaction_id, episode) transaction_id, episode, sent_date, deadline_date FROM requests
        ORDER BY transaction_id, episode, sent_date DESC, signed_date DESC, notification_uuid DESC
    ), removed AS (
        -- RETURNING gives each row as it is once locked: an answer committed meanwhile is kept.
        DELETE FROM app_store.consumption_requests c
        WHERE c.notification_uuid IN (SELECT notification_uuid FROM requests)
            AND c.notification_uuid NOT IN (SELECT notification_uuid FROM firsts)
        RETURNING c.notification_uuid, c.answered_date
    ), noted AS (
        UPDATE app_store.refund_request_events e SET answered_date = r.answered_date
        FROM removed r WHERE e.notification_uuid = r.notification_uuid AND r.answered_date IS NOT NULL
        RETURNING 1
    ), answers AS (
        SELECT notification_uuid, answered_date FROM requests WHERE answered_date IS NOT NULL
        UNION ALL SELECT notification_uuid, answered_date FROM removed WHERE answered_date IS NOT NULL
        UNION ALL SELECT c.notification_uuid, c.answered_date FROM app_store.consumption_requests c
            WHERE c.notification_uuid IN (SELECT notification_uuid FROM requests) AND c.answered_date IS NOT NULL
    ), answered AS (
        SELECT q.transaction_id, q.episode, min(a.answered_date) AS answered_date
        FROM requests q JOIN answers a USING (notification_uuid)
        GROUP BY q.transaction_id, q.episode
    )
    INSERT INTO app_store.consumption_requests (notification_uuid, environment, bundle_id, original_transaction_id, transaction_id,
        product_id, app_account_token, reason, sent_date, deadline_date, answered_date, first_sent_date)
    SELECT f.notification_uuid, f.environment, f.bundle_id, f.original_transaction_id, f.transaction_id,
        f.product_id, f.app_account_token, f.reason, l.sent_date, l.deadline_date, a.answered_date, f.sent_date
    FROM firsts f
    JOIN latest l ON l.transaction_id = f.transaction_id AND l.episode = f.episode
    LEFT JOIN answered a ON a.transaction_id = f.transaction_id AND a.episode = f.episode
    ON CONFLICT (notification_uuid) DO UPDATE SET
        answered_date = coalesce(app_store.consumption_requests.answered_date, EXCLUDED.answered_date),
        sent_date = EXCLUDED.sent_date, deadline_date = EXCLUDED.deadline_date, first_sent_date = EXCLUDED.first_sent_date
        WHERE (app_store.consumption_requests.answered_date IS NULL AND EXCLUDED.answered_date IS NOT NULL)
            OR app_store.consumption_requests.sent_date IS DISTINCT FROM EXCLUDED.sent_date
            OR app_store.consumption_requests.deadline_date IS DISTINCT FROM EXCLUDED.deadline_date
            OR app_store.consumption_requests.first_sent_date IS DISTINCT FROM EXCLUDED.first_sent_date;
$$;

-- A row written without it (a request without a transaction ID is an episode of one request, and
-- a team's own writer may not know the column): its own sent_date.
CREATE OR REPLACE FUNCTION app_store.consumption_request_first_sent() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    NEW.first_sent_date := coalesce(NEW.first_sent_date, NEW.sent_date);
    RETURN NEW;
END;
$$;
DROP TRIGGER IF EXISTS consumption_request_first_sent ON app_store.consumption_requests;
CREATE TRIGGER consumption_request_first_sent BEFORE INSERT ON app_store.consumption_requests
    FOR EACH ROW EXECUTE FUNCTION app_store.consumption_request_first_sent();
UPDATE app_store.consumption_requests SET first_sent_date = sent_date WHERE first_sent_date IS NULL AND transaction_id IS NULL;

-- The episodes recorded before this migration, settled again: their latest request's deadline.
SELECT app_store.settle_consumption_requests(bundle_id, environment, array_agg(DISTINCT transaction_id))
FROM app_store.refund_request_events
GROUP BY bundle_id, environment;

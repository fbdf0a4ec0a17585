-- appstore-reconcile ledger, migration 0022: one open refund request per transaction.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- While a refund request is unanswered, Apple sends a new CONSUMPTION_REQUEST for the same
-- transaction now and then, each with a notificationUUID of its own (Apple staff, developer forum
-- thread 756151). Until this migration each became a row of app_store.consumption_requests with
-- its own deadline: a team that answered and marked one kept being paged for the others. Now:
--
--   * every CONSUMPTION_REQUEST, REFUND and REFUND_DECLINED that names its transaction is an event
--     of app_store.refund_request_events (written with its notification, which is still recorded);
--   * a transaction's requests fall into episodes, cut by Apple's decisions (REFUND,
--     REFUND_DECLINED): a request signed after a decision is a new request;
--   * app_store.consumption_requests holds one row per episode (bundle_id, environment,
--     transaction_id): its first request's, so its deadline is 12 hours after the first request
--     was sent. A team's answered_date on any request of the episode is kept on that row, so
--     `UPDATE app_store.consumption_requests SET answered_date = now() WHERE transaction_id = …`
--     silences the deadline gauge and alert for the whole episode, whatever Apple sends after.
--
-- app_store.settle_consumption_requests() decides the episodes of some transactions from their
-- events alone, whatever order the notifications were recorded in (a recovery records the
-- requests before the decisions that separate them): every writer calls it, in the transaction
-- that records such a notification. Requests without a transaction ID keep a row each.

CREATE TABLE IF NOT EXISTS app_store.refund_request_events (
    notification_uuid       uuid PRIMARY KEY,
    kind                    text NOT NULL CHECK (kind IN ('request', 'decision')),
    bundle_id               text NOT NULL,
    environment             text NOT NULL,
    transaction_id          text NOT NULL,
    -- The notification's signedDate: what orders requests and decisions.
    signed_date             timestamptz NOT NULL,
    -- A request's row of app_store.consumption_requests, as it was written (NULL for decisions).
    original_transaction_id text,
    product_id              text,
    app_account_token       uuid,
    reason                  text,
    sent_date               timestamptz,
    deadline_date           timestamptz,
    -- The answered_date a team had set on this request's row when the row was settled away, so
    -- that the answer comes back with the row if a decision recorded later splits the episode.
    answered_date           timestamptz
);

CREATE INDEX IF NOT EXISTS refund_request_events_transaction
    ON app_store.refund_request_events (bundle_id, environment, transaction_id);

-- The requests and decisions recorded before this migration.
INSERT INTO app_store.refund_request_events (notification_uuid, kind, bundle_id, environment, transaction_id, signed_date,
    original_transaction_id, product_id, app_account_token, reason, sent_date, deadline_date)
SELECT c.notification_uuid, 'request', c.bundle_id, c.environment, c.transaction_id, coalesce(n.signed_date, c.sent_date),
    c.original_transaction_id, c.product_id, c.app_account_token, c.reason, c.sent_date, c.deadline_date
FROM app_store.consumption_requests c
LEFT JOIN app_store.notifications n USING (notification_uuid)
WHERE c.transaction_id IS NOT NULL
ON CONFLICT (notification_uuid) DO NOTHING;

INSERT INTO app_store.refund_request_events (notification_uuid, kind, bundle_id, environment, transaction_id, signed_date)
SELECT n.notification_uuid, 'decision', n.bundle_id, n.environment, n.transaction_id, n.signed_date
FROM app_store.notifications n
WHERE n.notification_type IN ('REFUND', 'REFUND_DECLINED') AND n.transaction_id IS NOT NULL
    AND n.bundle_id IS NOT NULL AND n.environment IS NOT NULL
ON CONFLICT (notification_uuid) DO NOTHING;

-- Makes app_store.consumption_requests hold, for each of these transactions of one App Store,
-- exactly one row per episode: the episode's first request (by sent_date, then signedDate), with
-- the earliest answered_date a team set on any request of it. Rows of requests that are not an
-- episode's first are deleted (their notifications stay recorded; the change feed has no row for
-- a deletion), their answered_date kept on their event; a first whose row was deleted earlier (a
-- decision recorded after the request that follows it) gets its row back, with its answer.
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
        product_id, app_account_token, reason, sent_date, deadline_date, answered_date)
    SELECT f.notification_uuid, f.environment, f.bundle_id, f.original_transaction_id, f.transaction_id,
        f.product_id, f.app_account_token, f.reason, f.sent_date, f.deadline_date, a.answered_date
    FROM firsts f LEFT JOIN answered a ON a.transaction_id = f.transaction_id AND a.episode = f.episode
    ON CONFLICT (notification_uuid) DO UPDATE SET answered_date = EXCLUDED.answered_date
        WHERE app_store.consumption_requests.answered_date IS NULL AND EXCLUDED.answered_date IS NOT NULL;
$$;

-- The requests recorded before this migration, settled: each transaction's repeats become one row.
SELECT app_store.settle_consumption_requests(bundle_id, environment, array_agg(DISTINCT transaction_id))
FROM app_store.refund_request_events
GROUP BY bundle_id, environment;

-- appstore-reconcile ledger, migration 0024: the answers the tool gave Apple's refund requests.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- `consumption-requests --answer` answers each open refund request (app_store.consumption_requests:
-- not answered, deadline ahead) with Send Consumption Information v2, from the team's facts (the
-- app's refundRequests.facts query). Each request it looked at gets a row here, whatever came of
-- it, so that a support engineer can see later what was said to Apple, when, and what Apple
-- answered:
--
--   outcome        sent (Apple answered 202), no_facts (the facts query returned no row),
--                  no_consent (customer_consented not true), invalid (a value Apple's rules refuse,
--                  or two rows), failed (Apple refused it, or its outcome is unknown)
--   detail         invalid: the column and what is wrong; failed: Apple's status and error code,
--                  or what became of the request
--   sent           the body sent to Apple (sent, failed), as JSON; NULL when nothing was sent
--   apple_status   Apple's HTTP status (202, 4xx, 5xx); NULL when nothing was sent or no answer came
--   apple_error    Apple's errorCode, when it gave one
--
-- A request answered (`sent`) has answered_date set on every unanswered row of
-- app_store.consumption_requests for its (bundle_id, environment, transaction_id), in the same
-- transaction as its row here.

CREATE TABLE IF NOT EXISTS app_store.consumption_answers (
    id              bigserial PRIMARY KEY,
    bundle_id       text NOT NULL,
    environment     text NOT NULL,
    transaction_id  text NOT NULL,
    outcome         text NOT NULL CHECK (outcome IN ('sent', 'no_facts', 'no_consent', 'invalid', 'failed')),
    detail          text,
    sent            jsonb,
    apple_status    integer,
    apple_error     bigint,
    answered_at     timestamptz NOT NULL DEFAULT now(),
    run_id          uuid
);

CREATE INDEX IF NOT EXISTS consumption_answers_request
    ON app_store.consumption_answers (bundle_id, environment, transaction_id, answered_at);

-- appstore-reconcile ledger, migration 0017: a payload refused at the webhook is kept once per
-- reason, however often it is sent.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- 0016 counted the repeats of an unproven payload (`kept_whole` false) on one row. A payload
-- Apple did sign but that is refused for what it says (another app, another environment) is
-- kept whole, and anyone holding one can send it again and again: a repeat of the same bytes
-- for the same reason at the webhook (`source = 'webhook'`, serve and ingest) now counts on its
-- first row too (`times_seen`, `last_rejected_at`). What a run read from Apple's API is
-- recorded per run as before.
--
-- Webhook rows written twice before this migration are merged first: the oldest row is kept,
-- with the sum of their counts and the latest time. A serve older than this migration refuses
-- (503) the payloads it would reject until it is upgraded; Apple sends them again.
WITH duplicates AS (
    SELECT rejection_id,
        first_value(rejection_id) OVER same AS kept,
        sum(times_seen) OVER same AS seen,
        max(last_rejected_at) OVER same AS latest
    FROM app_store.rejected_payloads
    WHERE source = 'webhook' AND payload_sha256 IS NOT NULL
    WINDOW same AS (PARTITION BY payload_sha256, reason ORDER BY rejection_id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
), merged AS (
    UPDATE app_store.rejected_payloads r SET times_seen = d.seen, last_rejected_at = d.latest
    FROM duplicates d
    WHERE r.rejection_id = d.rejection_id AND d.rejection_id = d.kept AND d.seen > r.times_seen
)
DELETE FROM app_store.rejected_payloads r USING duplicates d
WHERE r.rejection_id = d.rejection_id AND d.rejection_id <> d.kept;

CREATE UNIQUE INDEX IF NOT EXISTS rejected_payloads_webhook_idx
    ON app_store.rejected_payloads (payload_sha256, reason) WHERE source = 'webhook';
DROP INDEX IF EXISTS app_store.rejected_payloads_unproven_idx;

-- appstore-reconcile ledger, migration 0016: a payload nobody proved Apple signed is kept as a
-- summary, not whole; rejected payloads have a retention.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- `serve` is an endpoint anyone can POST to. A payload whose signature or certificate chain does
-- not check out proves nothing about who sent it, so keeping it whole lets anyone fill the
-- ledger. Such a payload is now recorded by its SHA-256 (`payload_sha256`), its size
-- (`payload_bytes`), its first 256 bytes (`signed_payload`, with `kept_whole` false), its reason,
-- the customer its unverified content names (`unverified_original_transaction_id`, to repair
-- them) and how often it came (`times_seen`, `last_rejected_at`): the same bytes for the same
-- reason again only count. A payload Apple did sign, refused for what it says (another app,
-- another environment, a nested payload that failed), is kept whole as before (`kept_whole`).
--
-- Rows written before this migration are kept whole (their digest and size are filled in here).
-- `nightly` deletes rows not seen for its `--keep-rejected-days` (30 by default), by `last_rejected_at`.
ALTER TABLE app_store.rejected_payloads
    ADD COLUMN IF NOT EXISTS payload_sha256 bytea,
    ADD COLUMN IF NOT EXISTS payload_bytes integer,
    ADD COLUMN IF NOT EXISTS kept_whole boolean NOT NULL DEFAULT true,
    ADD COLUMN IF NOT EXISTS times_seen integer NOT NULL DEFAULT 1,
    ADD COLUMN IF NOT EXISTS last_rejected_at timestamptz,
    ADD COLUMN IF NOT EXISTS unverified_original_transaction_id text;

UPDATE app_store.rejected_payloads
SET payload_sha256 = sha256(convert_to(signed_payload, 'UTF8')), payload_bytes = octet_length(signed_payload)
WHERE payload_sha256 IS NULL;

UPDATE app_store.rejected_payloads SET last_rejected_at = rejected_at WHERE last_rejected_at IS NULL;
ALTER TABLE app_store.rejected_payloads ALTER COLUMN last_rejected_at SET DEFAULT now();
ALTER TABLE app_store.rejected_payloads ALTER COLUMN last_rejected_at SET NOT NULL;

-- One row per unproven payload and reason: a repeat counts on it (ON CONFLICT … WHERE NOT kept_whole).
CREATE UNIQUE INDEX IF NOT EXISTS rejected_payloads_unproven_idx
    ON app_store.rejected_payloads (payload_sha256, reason) WHERE NOT kept_whole;
CREATE INDEX IF NOT EXISTS rejected_payloads_last_rejected_idx
    ON app_store.rejected_payloads (last_rejected_at);

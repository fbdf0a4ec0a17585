-- appstore-reconcile ledger, migration 0018: deliveries that progress and keys without secrets.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- A delivery refused `maximum attempts` times (12 by default) is parked: `failed_at` is set, it
-- is sent no more until `deliver --retry-failed` (which clears it and its attempts), and
-- `deliver --list` and serve's metrics show it. The queue is taken fewest attempts first, so a
-- notification that keeps timing out waits behind the others instead of starving them.
--
-- `target` is the key of a handler, not its URL: the URL without its query or fragment, where a
-- token may hide, and when it had one, `#query-sha256=` and the first 16 hex digits of the whole
-- URL's SHA-256 (so two URLs that differ only in their token stay apart). Rows written with the
-- whole URL are rewritten here; the tool computes the same key from the URL it is given.
ALTER TABLE app_store.deliveries ADD COLUMN IF NOT EXISTS failed_at timestamptz;

UPDATE app_store.deliveries
SET target = substring(target FROM '^[^?#]*') || '#query-sha256=' || left(encode(sha256(convert_to(target, 'UTF8')), 'hex'), 16)
WHERE target ~ '[?#]' AND target !~ '#query-sha256=[0-9a-f]{16}$';

CREATE INDEX IF NOT EXISTS deliveries_queue ON app_store.deliveries (target, attempts) WHERE delivered_at IS NULL AND failed_at IS NULL;

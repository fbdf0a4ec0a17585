-- appstore-reconcile ledger, migration 0028: the window each mass extension made good.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- One remedy per outage (issue 62): `compensate --start S --end E` (one extension per subscriber
-- the outage hurt) and `compensate --start S --end E --all-active --days N` (every active
-- subscriber of each product) exclude each other per product for overlapping windows: the second
-- sends nothing for what the first made good unless `--again` is given. The per-subscription rows
-- (app_store.renewal_extensions) keep their window since 0026; a mass extension's is kept here.
-- A row written before this migration has none: it counts as overlapping any window.

ALTER TABLE app_store.mass_extensions ADD COLUMN IF NOT EXISTS window_start timestamptz;
ALTER TABLE app_store.mass_extensions ADD COLUMN IF NOT EXISTS window_end timestamptz;

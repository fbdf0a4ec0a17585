-- appstore-reconcile ledger, migration 0004: signed payloads compressed with lz4.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.

-- A signed payload is a few kilobytes of base64url text, stored out of line and compressed.
-- PostgreSQL's default compression (pglz) was the largest single cost of the database's CPU in
-- the end-to-end benchmark (perf: 9% of the server's samples, writing recovered notifications);
-- lz4 compresses such text at a fraction of that cost. Only values written from now on use it.
-- A server without lz4 (built without it, or older than PostgreSQL 14) keeps pglz: the statements
-- are run through EXECUTE so that such a server's error is caught rather than failing the migration.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE app_store.notifications ALTER COLUMN signed_payload SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE app_store.transactions ALTER COLUMN signed_transaction SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE app_store.rejected_payloads ALTER COLUMN signed_payload SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'lz4 compression is not available here (%); signed payloads keep the default compression', SQLERRM;
END
$$;

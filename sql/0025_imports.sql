-- appstore-reconcile ledger, migration 0025: the progress of `import`, so that an import killed
-- part-way goes on where it stopped. Idempotent, like 0001: `psql -1 -f` works, and `migrate`
-- adopts what psql applied.
--
-- An import is keyed by its input's content: `input_sha256` is the hex SHA-256 of the input's kind
-- (transaction-ids, receipts, order-ids) and its bytes. Started again with the same input, an import
-- skips the lines it had finished (`lines_done`: every line before it was imported or reported) and
-- the Apple accounts it had imported (`app_store.import_accounts`), without asking Apple about them
-- again. A different input (one line changed) is another import. What an import writes otherwise is
-- what a repair writes: transactions, subscriptions, accounts and their revisions, the change feed.

CREATE TABLE IF NOT EXISTS app_store.imports (
    bundle_id       text NOT NULL,
    environment     text NOT NULL,
    input_sha256    text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('transaction-ids', 'receipts', 'order-ids')),
    lines_total     bigint NOT NULL,
    lines_done      bigint NOT NULL DEFAULT 0,
    started_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (bundle_id, environment, input_sha256)
);

-- The accounts (app_store.accounts.account_id) an import has imported, and the input line that
-- named each first.
CREATE TABLE IF NOT EXISTS app_store.import_accounts (
    bundle_id       text NOT NULL,
    environment     text NOT NULL,
    input_sha256    text NOT NULL,
    account_id      text NOT NULL,
    line            bigint NOT NULL,
    imported_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bundle_id, environment, input_sha256, account_id),
    FOREIGN KEY (bundle_id, environment, input_sha256) REFERENCES app_store.imports ON DELETE CASCADE
);

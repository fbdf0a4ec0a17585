-- appstore-reconcile ledger, migration 0003: what each run changed, per customer.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.

-- One row per subscription a run's pass 1 changed: the row as it was before the run first
-- changed it (null: there was none) and as the run last left it, written in the same database
-- transaction as the change. The run's report lists these, read back in order, so that the run
-- need not hold them in memory; they stay as the audit of what each run did, and go with the run
-- (ON DELETE CASCADE) when old rows of app_store.runs are deleted.
-- before/after: the subscription's columns as JSON, times as UNIX milliseconds.
CREATE TABLE IF NOT EXISTS app_store.run_subscription_changes (
    run_id                  uuid NOT NULL REFERENCES app_store.runs (run_id) ON DELETE CASCADE,
    original_transaction_id text NOT NULL,
    before                  jsonb,
    after                   jsonb NOT NULL,
    PRIMARY KEY (run_id, original_transaction_id)
);

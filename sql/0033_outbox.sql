-- appstore-reconcile ledger, migration 0033: the outbox of lifecycle events.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- Issue 66. Each change a writer makes to a subscription or a transaction (`serve`, a recovery,
-- a repair, an import) inserts its lifecycle events here, in the transaction of the change: the
-- events are a pure function of the rows before and after (the LifecycleEvents target, in
-- Swift), and a row is only ever inserted. The columns are those Debezium's outbox event router
-- reads by default (id, aggregatetype, aggregateid, type, payload), with created_at, bundle_id and
-- environment as real columns (a topic per environment needs a real column: generated columns
-- are not published before PostgreSQL 18). `prune --outbox-older-than 7d` deletes old rows (the
-- router ignores deletes). `migrate` creates the publication appstore_reconcile_outbox for the
-- table when the server's wal_level is logical (docs/streams.md).

CREATE TABLE IF NOT EXISTS app_store.outbox (
    id              uuid PRIMARY KEY,
    aggregatetype   text NOT NULL,
    aggregateid     text NOT NULL,
    type            text NOT NULL,
    payload         jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    bundle_id       text,
    environment     text
);

CREATE INDEX IF NOT EXISTS outbox_created_at_idx ON app_store.outbox (created_at);

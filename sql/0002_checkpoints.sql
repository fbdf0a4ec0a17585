-- appstore-reconcile ledger, migration 0002: checkpoints, so that a run that died resumes where
-- it stopped, and the shard of a run (`--shard INDEX/COUNT`).
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.

-- Pass 1's progress through each query of its plan, written in the same database transaction as
-- the page it covers. A run of the same window, environment, filter and shard that finds rows
-- here resumes from them; a run that finishes deletes them.
--   query:            the query's stable key (DID_RENEW/BILLING_RECOVERY, EXPIRED/-, *, ...),
--                     or 'pass-1' for the row that says the whole pass is done (shards wait on it);
--   position:         how many items of the query are handled and committed;
--   pagination_token: Apple's token for the page after them (null: start the query over and skip
--                     `position` items; an expired token falls back to the same);
--   completed:        the query (or the pass) has no more pages.
CREATE TABLE IF NOT EXISTS app_store.run_checkpoints (
    environment      text NOT NULL,
    window_start     timestamptz NOT NULL,
    window_end       timestamptz NOT NULL,
    only_failures    boolean NOT NULL,
    shard            text NOT NULL,
    query            text NOT NULL,
    position         integer NOT NULL,
    pagination_token text,
    completed        boolean NOT NULL DEFAULT false,
    run_id           uuid,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment, window_start, window_end, only_failures, shard, query)
);

-- The shard of a run, 'INDEX/COUNT'; null for an unsharded run.
ALTER TABLE app_store.runs ADD COLUMN IF NOT EXISTS shard text;

-- runs.outcome gains 'abandoned': a run recorded as running whose process died (SIGKILL, a lost
-- machine) is marked so by the next run of the same shard, which holds the run lock.

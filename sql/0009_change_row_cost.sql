-- appstore-reconcile ledger, migration 0009: the change feed's row function, cheaper. Idempotent,
-- like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- app_store.change_row (0007) turns a row into the feed's JSON: the timestamptz columns named in
-- `times` become epoch milliseconds under a `_ms` name, null fields are dropped, and the signed
-- transaction and bookkeeping columns are left out. 0007 did it key by key over every column
-- (two array searches and a CASE per key), as a SQL function that PostgreSQL cannot inline and so
-- starts an executor for at each call. This version, in PL/pgSQL (whose simple expressions are
-- evaluated without one), removes those columns at once and converts only the few time columns,
-- with the same result: a profile of `serve` under load had
-- the change-feed trigger at 45% of PostgreSQL's CPU, most of it in this function.
CREATE OR REPLACE FUNCTION app_store.change_row(r jsonb, times text[]) RETURNS jsonb
    LANGUAGE plpgsql STABLE
AS $$
DECLARE
    result jsonb := r - 'signed_transaction' - 'recorded_at' - 'updated_at' - times;
    t      text;
BEGIN
    FOREACH t IN ARRAY times LOOP
        IF r ->> t IS NOT NULL THEN
            result := result || jsonb_build_object(regexp_replace(t, '_date$', '_ms'),
                round(extract(epoch FROM (r ->> t)::timestamptz) * 1000)::bigint);
        END IF;
    END LOOP;
    RETURN jsonb_strip_nulls(result);
END;
$$;

-- appstore-reconcile ledger, migration 0021: each signed thing stored once.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied. The files
-- before this one that alter the two tables by their old names (views from here on) were amended
-- to leave them alone once this file has run, so every file can still run again in order.
--
-- A notification's JWS was about 20 KB stored (13.8 KB of TOAST after lz4), its transaction's
-- 4 KB more: every JWS carries Apple's three-certificate chain in its header, a notification's
-- payload carries two more JWS (the transaction and the renewal info), each with the chain again
-- and base64url-encoded a second time, and the transaction's JWS was stored both inside the
-- notification's and on its own. Now each JWS is an object keyed by the SHA-256 of its text as
-- received (app_store.signed_objects): its header by reference (app_store.jws_headers, one row
-- per distinct header: one for all of Apple's), its payload's bytes decoded with each nested JWS
-- cut out (a 0x00 byte, which no JSON text holds, stands in its place, and the nested JWS is an
-- object of its own), its signature's 64 bytes. A JWS that would not come back byte for byte
-- (not three base64url parts, a 0x00 in its payload) is kept whole. app_store.jws_text(key)
-- gives back exactly the text received; its SHA-256 is the key.
--
-- The tables change shape, and their readers keep working: app_store.notifications and
-- app_store.transactions are now views over app_store.notification_rows and
-- app_store.transaction_rows (the same tables, renamed: their indexes, triggers and references
-- follow), with the same columns in the same order; `signed_payload` and `signed_transaction`
-- are the exact JWS, rebuilt when read (and only when selected). The views are simple enough for
-- PostgreSQL to update through them (UPDATE, DELETE, INSERT without the JWS column). A row
-- written before this migration keeps its JWS as text until `migrate` converts it, in batches of
-- a fraction of a second each (app_store.compact_notifications / compact_transactions), while
-- the ledger stays in use; a row of a writer of your own may do the same (the views read the text
-- first). A notification whose stored JWS `prune` dropped keeps its key (the SHA-256 of the JWS
-- Apple sent) and its decoded columns; its `signed_payload` reads as NULL.
--
-- Amended for migration 0023, which adds columns to the app_store.transactions view: run again
-- after it (psql, or `migrate` adopting a psql-applied ledger), this file leaves the view as 0023
-- made it (a view cannot lose columns). The earlier text:
-- amends checksum 9b0a5f8f509d9e06041cc04d1865761540c0dbfee848d5ed0498f046f8c83cca

CREATE TABLE IF NOT EXISTS app_store.jws_headers (
    header_sha256 bytea PRIMARY KEY,
    header        text NOT NULL
);

CREATE TABLE IF NOT EXISTS app_store.signed_objects (
    jws_sha256    bytea PRIMARY KEY,
    header_sha256 bytea,
    payload       bytea,
    signature     bytea,
    nested        bytea,
    whole         text,
    CHECK ((whole IS NULL) = (payload IS NOT NULL AND header_sha256 IS NOT NULL AND signature IS NOT NULL))
);

DO $$
BEGIN
    EXECUTE 'ALTER TABLE app_store.signed_objects ALTER COLUMN whole SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'lz4 compression is not available here (%); kept whole JWS use the default compression', SQLERRM;
END
$$;


-- Base64url without padding, as a JWS's parts are written.
CREATE OR REPLACE FUNCTION app_store.base64url_encode(bytes bytea) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT translate(encode(bytes, 'base64'), E'+/=\n', '-_') $$;

CREATE OR REPLACE FUNCTION app_store.base64url_decode(part text) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT decode(translate(part, '-_', '+/') || repeat('=', (4 - length(part) % 4) % 4), 'base64') $$;

-- The JWS text of an object, exactly as received; NULL when there is no such object (pruned).
CREATE OR REPLACE FUNCTION app_store.jws_text(object_key bytea) RETURNS text
    LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    o app_store.signed_objects;
    header text;
    body bytea;
    inner_text text;
    i integer;
BEGIN
    SELECT * INTO o FROM app_store.signed_objects WHERE jws_sha256 = object_key;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF o.whole IS NOT NULL THEN
        RETURN o.whole;
    END IF;
    SELECT h.header INTO header FROM app_store.jws_headers h WHERE h.header_sha256 = o.header_sha256;
    body := o.payload;
    FOR i IN 0 .. coalesce(length(o.nested), 0) / 32 - 1 LOOP
        inner_text := app_store.jws_text(substring(o.nested FROM i * 32 + 1 FOR 32));
        IF inner_text IS NULL THEN
            RETURN NULL;
        END IF;
        body := overlay(body PLACING convert_to(inner_text, 'UTF8') FROM position('\x00'::bytea IN body) FOR 1);
    END LOOP;
    RETURN header || '.' || app_store.base64url_encode(body) || '.' || app_store.base64url_encode(o.signature);
END;
$$;

-- Stores a JWS text as objects (the same split the tool makes when it writes) and returns its
-- key. What would not come back byte for byte is kept whole; the result is checked before it is
-- kept.
CREATE OR REPLACE FUNCTION app_store.store_jws(jws text) RETURNS bytea
    LANGUAGE plpgsql
AS $$
DECLARE
    object_key bytea := sha256(convert_to(jws, 'UTF8'));
    nested_pattern constant text := '"(eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)"';
    parts text[] := string_to_array(jws, '.');
    body bytea;
    body_text text;
    signature bytea;
    nested_texts text[];
    pieces text[];
    nested_keys bytea := ''::bytea;
    header_key bytea;
    inserted integer;
    i integer;
BEGIN
    IF EXISTS (SELECT 1 FROM app_store.signed_objects WHERE jws_sha256 = object_key) THEN
        RETURN object_key;
    END IF;
    IF cardinality(parts) = 3 AND parts[1] <> '' AND parts[2] ~ '^[A-Za-z0-9_-]*$' AND parts[3] ~ '^[A-Za-z0-9_-]*$'
        AND length(parts[2]) % 4 <> 1 AND length(parts[3]) % 4 <> 1 THEN
        body := app_store.base64url_decode(parts[2]);
        signature := app_store.base64url_decode(parts[3]);
        IF app_store.base64url_encode(body) = parts[2] AND app_store.base64url_encode(signature) = parts[3]
            AND position('\x00'::bytea IN body) = 0 THEN
            BEGIN
                body_text := convert_from(body, 'UTF8');
            EXCEPTION WHEN OTHERS THEN
                body_text := NULL;  -- not UTF-8: no nested JWS is looked for
            END;
            IF body_text IS NOT NULL THEN
                SELECT array_agg(m[1] ORDER BY n) INTO nested_texts
                FROM regexp_matches(body_text, nested_pattern, 'g') WITH ORDINALITY AS found(m, n);
            END IF;
            IF nested_texts IS NOT NULL THEN
                pieces := regexp_split_to_array(body_text, nested_pattern);
                body := convert_to(pieces[1], 'UTF8');
                FOR i IN 1 .. cardinality(nested_texts) LOOP
                    nested_keys := nested_keys || app_store.store_jws(nested_texts[i]);
                    body := body || '\x220022'::bytea || convert_to(pieces[i + 1], 'UTF8');
                END LOOP;
            END IF;
            header_key := sha256(convert_to(parts[1], 'UTF8'));
            INSERT INTO app_store.jws_headers (header_sha256, header) VALUES (header_key, parts[1]) ON CONFLICT DO NOTHING;
            INSERT INTO app_store.signed_objects (jws_sha256, header_sha256, payload, signature, nested)
            VALUES (object_key, header_key, body, signature, nullif(nested_keys, ''::bytea))
            ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS inserted = ROW_COUNT;
            IF inserted = 0 OR app_store.jws_text(object_key) = jws THEN
                RETURN object_key;  -- stored, here or by a writer at the same moment
            END IF;
            DELETE FROM app_store.signed_objects WHERE jws_sha256 = object_key;
        END IF;
    END IF;
    INSERT INTO app_store.signed_objects (jws_sha256, whole) VALUES (object_key, jws) ON CONFLICT DO NOTHING;
    RETURN object_key;
END;
$$;

-- Converts the rows written before this migration, `batch` keys at a time in key order after
-- `after` (NULL: from the first); returns the last key looked at, NULL when there were none.
-- `migrate` calls it in a loop, one short transaction per call.
CREATE OR REPLACE FUNCTION app_store.compact_notifications(after uuid, batch integer) RETURNS uuid
    LANGUAGE plpgsql
AS $$
DECLARE
    last_key uuid;
    first_key uuid;
BEGIN
    IF after IS NULL THEN
        SELECT notification_uuid INTO first_key FROM app_store.notification_rows ORDER BY notification_uuid LIMIT 1;
    ELSE
        SELECT notification_uuid INTO first_key FROM app_store.notification_rows WHERE notification_uuid > after
        ORDER BY notification_uuid LIMIT 1;
    END IF;
    IF first_key IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT k INTO last_key FROM (
        SELECT notification_uuid AS k FROM app_store.notification_rows WHERE notification_uuid >= first_key
        ORDER BY notification_uuid LIMIT batch) s
    ORDER BY k DESC LIMIT 1;
    UPDATE app_store.notification_rows
    SET signed_payload_key = app_store.store_jws(signed_payload), signed_payload = NULL
    WHERE notification_uuid BETWEEN first_key AND last_key AND signed_payload IS NOT NULL;
    RETURN last_key;
END;
$$;

CREATE OR REPLACE FUNCTION app_store.compact_transactions(after text[], batch integer) RETURNS text[]
    LANGUAGE plpgsql
AS $$
DECLARE
    first_key text[];
    last_key text[];
BEGIN
    IF after IS NULL THEN
        SELECT ARRAY[bundle_id, environment, transaction_id] INTO first_key FROM app_store.transaction_rows
        ORDER BY bundle_id, environment, transaction_id LIMIT 1;
    ELSE
        SELECT ARRAY[bundle_id, environment, transaction_id] INTO first_key FROM app_store.transaction_rows
        WHERE (bundle_id, environment, transaction_id) > (after[1], after[2], after[3])
        ORDER BY bundle_id, environment, transaction_id LIMIT 1;
    END IF;
    IF first_key IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT ARRAY[b, e, t] INTO last_key FROM (
        SELECT bundle_id AS b, environment AS e, transaction_id AS t FROM app_store.transaction_rows
        WHERE (bundle_id, environment, transaction_id) >= (first_key[1], first_key[2], first_key[3])
        ORDER BY bundle_id, environment, transaction_id LIMIT batch) s
    ORDER BY b DESC, e DESC, t DESC LIMIT 1;
    -- By key, row by row: a range over the three key columns is estimated from the first alone
    -- (one app: every row), which could make the planner read the whole table each batch.
    UPDATE app_store.transaction_rows t
    SET signed_transaction_key = app_store.store_jws(t.signed_transaction), signed_transaction = NULL
    FROM (
        SELECT bundle_id, environment, transaction_id FROM app_store.transaction_rows
        WHERE (bundle_id, environment, transaction_id) >= (first_key[1], first_key[2], first_key[3])
        ORDER BY bundle_id, environment, transaction_id LIMIT batch
    ) k
    WHERE t.bundle_id = k.bundle_id AND t.environment = k.environment AND t.transaction_id = k.transaction_id
        AND t.signed_transaction IS NOT NULL;
    RETURN last_key;
END;
$$;

-- Where the conversion of rows written before this migration stands, per table: the last key
-- converted, and when it finished (a new ledger finishes at once). One call converts one batch
-- of one table and records where it stopped in the same transaction, so an interrupted
-- `migrate` resumes; it returns false once every table is done.
CREATE TABLE IF NOT EXISTS app_store.signed_object_conversion (
    table_name  text PRIMARY KEY,
    after       text[],
    finished_at timestamptz
);
INSERT INTO app_store.signed_object_conversion (table_name) VALUES ('notification_rows'), ('transaction_rows')
ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION app_store.convert_stored_jws(batch integer) RETURNS boolean
    LANGUAGE plpgsql
AS $$
DECLARE
    progress app_store.signed_object_conversion;
    next_key text[];
    last_notification uuid;
BEGIN
    LOOP
        SELECT * INTO progress FROM app_store.signed_object_conversion WHERE finished_at IS NULL
        ORDER BY table_name LIMIT 1 FOR UPDATE;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        IF progress.table_name = 'notification_rows' THEN
            last_notification := app_store.compact_notifications(progress.after[1]::uuid, batch);
            next_key := CASE WHEN last_notification IS NOT NULL THEN ARRAY[last_notification::text] END;
        ELSE
            next_key := app_store.compact_transactions(progress.after, batch);
        END IF;
        IF next_key IS NOT NULL THEN
            UPDATE app_store.signed_object_conversion SET after = next_key WHERE table_name = progress.table_name;
            RETURN true;
        END IF;
        -- Nothing left in this table: the next one, in the same call.
        UPDATE app_store.signed_object_conversion SET finished_at = now() WHERE table_name = progress.table_name;
    END LOOP;
END;
$$;

-- `prune --signed-older-than`: drops the stored JWS of notifications signed before `older_than`,
-- `batch` at a time in (signed_date, notification_uuid) order after the cursor given (NULLs: from
-- the first); returns how many it dropped and the cursor to go on from (NULL when done). Each
-- row keeps its decoded columns and its key, the SHA-256 of the JWS Apple sent
-- (signed_payload_key), and says when (signed_payload_pruned_at). Its objects go: the
-- notification's own, and each nested one (its transaction, its renewal info) that nothing kept
-- still uses: not the current JWS of one of the customer's transaction rows, not nested in
-- another notification of the customer that keeps its JWS (a nested JWS names its customer, so
-- no other customer's notification holds the same). A notification not yet delivered to your
-- handler (app_store.deliveries) keeps its JWS.
CREATE OR REPLACE FUNCTION app_store.prune_signed_payloads(
    older_than timestamptz, after_date timestamptz, after_uuid uuid, batch integer,
    OUT pruned integer, OUT last_date timestamptz, OUT last_uuid uuid)
    LANGUAGE plpgsql
AS $$
DECLARE
    r record;
    o app_store.signed_objects;
    k bytea;
    i integer;
BEGIN
    pruned := 0;
    FOR r IN
        SELECT n.notification_uuid, n.signed_date, n.original_transaction_id, n.signed_payload_pruned_at,
            coalesce(n.signed_payload_key, sha256(convert_to(n.signed_payload, 'UTF8'))) AS object_key
        FROM app_store.notification_rows n
        WHERE n.signed_date < older_than
            AND (after_date IS NULL OR (n.signed_date, n.notification_uuid) > (after_date, after_uuid))
            -- A notification still to be delivered to your handler keeps its JWS.
            AND NOT EXISTS (SELECT 1 FROM app_store.deliveries d WHERE d.notification_uuid = n.notification_uuid AND d.delivered_at IS NULL)
        ORDER BY n.signed_date, n.notification_uuid
        LIMIT batch
        FOR UPDATE
    LOOP
        last_date := r.signed_date;
        last_uuid := r.notification_uuid;
        CONTINUE WHEN r.signed_payload_pruned_at IS NOT NULL;
        SELECT * INTO o FROM app_store.signed_objects WHERE jws_sha256 = r.object_key;
        IF FOUND AND r.original_transaction_id IS NOT NULL THEN
            FOR i IN 0 .. coalesce(length(o.nested), 0) / 32 - 1 LOOP
                k := substring(o.nested FROM i * 32 + 1 FOR 32);
                IF NOT EXISTS (
                    SELECT 1 FROM app_store.transaction_rows t
                    WHERE t.original_transaction_id = r.original_transaction_id AND t.signed_transaction_key = k
                ) AND NOT EXISTS (
                    SELECT 1 FROM app_store.notification_rows m JOIN app_store.signed_objects p ON p.jws_sha256 = m.signed_payload_key
                    WHERE m.original_transaction_id = r.original_transaction_id AND m.notification_uuid <> r.notification_uuid
                        AND m.signed_payload_pruned_at IS NULL AND position(k IN p.nested) > 0
                ) THEN
                    DELETE FROM app_store.signed_objects WHERE jws_sha256 = k;
                END IF;
            END LOOP;
        END IF;
        DELETE FROM app_store.signed_objects WHERE jws_sha256 = r.object_key;
        UPDATE app_store.notification_rows
        SET signed_payload_key = r.object_key, signed_payload = NULL, signed_payload_pruned_at = now()
        WHERE notification_uuid = r.notification_uuid;
        pruned := pruned + 1;
    END LOOP;
END;
$$;


-- A writer of your own that inserts through the old names, JWS included, still can: the row goes
-- to the table with its JWS stored as objects at once. A notification already recorded is left
-- as it is (as with ON CONFLICT DO NOTHING: Apple sends the same notification again). An INSERT
-- with ON CONFLICT naming the key columns, or an UPDATE of the JWS, must go to the tables
-- themselves (app_store.notification_rows, app_store.transaction_rows: `signed_payload` and
-- `signed_transaction` there take the text, which the views read first). Other UPDATEs and
-- DELETEs work through the views as before.
CREATE OR REPLACE FUNCTION app_store.insert_notification_row() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM app_store.notification_rows WHERE notification_uuid = NEW.notification_uuid) THEN
        RETURN NEW;  -- recorded already: nothing stored again (a pruned one stays pruned)
    END IF;
    INSERT INTO app_store.notification_rows (notification_uuid, notification_type, subtype, signed_date, environment,
        original_transaction_id, transaction_id, signed_payload_key, source, recorded_at, bundle_id)
    VALUES (NEW.notification_uuid, NEW.notification_type, NEW.subtype, NEW.signed_date, NEW.environment,
        NEW.original_transaction_id, NEW.transaction_id,
        CASE WHEN NEW.signed_payload IS NOT NULL THEN app_store.store_jws(NEW.signed_payload) END,
        NEW.source, coalesce(NEW.recorded_at, now()), NEW.bundle_id)
    ON CONFLICT (notification_uuid) DO NOTHING;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION app_store.insert_transaction_row() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO app_store.transaction_rows (transaction_id, original_transaction_id, product_id, product_type, purchase_date,
        expires_date, revocation_date, revocation_reason, is_upgraded, signed_date, environment, signed_transaction_key,
        recorded_at, updated_at, app_account_token, in_app_ownership_type, subscription_group_identifier,
        web_order_line_item_id, quantity, price, currency, storefront, offer_type, offer_identifier, transaction_reason,
        revocation_type, revocation_percentage, app_transaction_id, bundle_id)
    VALUES (NEW.transaction_id, NEW.original_transaction_id, NEW.product_id, NEW.product_type, NEW.purchase_date,
        NEW.expires_date, NEW.revocation_date, NEW.revocation_reason, NEW.is_upgraded, NEW.signed_date, NEW.environment,
        CASE WHEN NEW.signed_transaction IS NOT NULL THEN app_store.store_jws(NEW.signed_transaction) END,
        coalesce(NEW.recorded_at, now()), coalesce(NEW.updated_at, now()), NEW.app_account_token,
        NEW.in_app_ownership_type, NEW.subscription_group_identifier, NEW.web_order_line_item_id, NEW.quantity, NEW.price,
        NEW.currency, NEW.storefront, NEW.offer_type, NEW.offer_identifier, NEW.transaction_reason, NEW.revocation_type,
        NEW.revocation_percentage, NEW.app_transaction_id, NEW.bundle_id);
    RETURN NEW;
END;
$$;


-- 0019's form of a row for the change feed, with the JWS's key left out as the JWS is.
CREATE OR REPLACE FUNCTION app_store.change_row_sql(tbl regclass, alias text) RETURNS text
    LANGUAGE sql STABLE
AS $$
    SELECT 'jsonb_strip_nulls(' || string_agg(object, ' || ' ORDER BY part) || ')'
    FROM (
        SELECT part, 'jsonb_build_object(' || string_agg(pair, ', ' ORDER BY attnum) || ')' AS object
        FROM (
            SELECT attnum, (row_number() OVER (ORDER BY attnum) - 1) / 40 AS part,
                CASE WHEN atttypid = 'timestamptz'::regtype
                    THEN format('%L, round(extract(epoch FROM %I.%I) * 1000)::bigint', regexp_replace(attname, '_date$', '_ms'), alias, attname)
                    ELSE format('%L, %I.%I', attname, alias, attname)
                END AS pair
            FROM pg_attribute
            WHERE attrelid = tbl AND attnum > 0 AND NOT attisdropped
                AND attname NOT IN ('signed_transaction', 'signed_transaction_key', 'recorded_at', 'updated_at', 'renewal_signed_date')
        ) pairs
        GROUP BY part
    ) objects
$$;

-- 0020's triggers, on the transactions' table under its new name. After an ALTER TABLE of
-- app_store.transaction_rows or app_store.subscriptions, run SELECT app_store.create_change_triggers().
CREATE OR REPLACE FUNCTION app_store.create_change_triggers() RETURNS void
    LANGUAGE plpgsql
AS $generator$
DECLARE
    spec record;
BEGIN
    FOR spec IN
        SELECT * FROM (VALUES
            ('subscription', 'subscriptions', 'original_transaction_id',
                '(context -> ''notifications'' -> ''subscription'' ->> n.original_transaction_id::text)::uuid'),
            ('transaction', 'transaction_rows', 'transaction_id',
                '(context -> ''notifications'' -> ''transaction'' ->> n.transaction_id::text)::uuid'),
            ('consumption_request', 'consumption_requests', 'notification_uuid', 'n.notification_uuid')
        ) AS s(kind, tbl, key, notification)
    LOOP
        EXECUTE format(
            $function$
            CREATE OR REPLACE FUNCTION app_store.record_%1$s_changes() RETURNS trigger
                LANGUAGE plpgsql
            AS $body$
            DECLARE
                context jsonb := nullif(current_setting('app_store.change_context', true), '')::jsonb;
                fed bigint;
            BEGIN
                IF context IS NULL OR NOT EXISTS (SELECT 1 FROM new_rows) THEN
                    RETURN NULL;
                END IF;
                PERFORM pg_advisory_xact_lock(hashtext('appstore-reconcile.changes'), 0);
                IF TG_OP = 'INSERT' THEN
                    INSERT INTO app_store.changes (bundle_id, environment, original_transaction_id, app_account_token, kind, before, after,
                        cause, notification_uuid, run_id)
                    SELECT n.bundle_id, n.environment, n.original_transaction_id, n.app_account_token, %1$L, NULL, %4$s,
                        context ->> 'cause', %6$s, (context ->> 'run')::uuid
                    FROM new_rows n;
                ELSE
                    INSERT INTO app_store.changes (bundle_id, environment, original_transaction_id, app_account_token, kind, before, after,
                        cause, notification_uuid, run_id)
                    SELECT c.bundle_id, c.environment, c.original_transaction_id, c.app_account_token, %1$L, c.before, c.after,
                        context ->> 'cause', c.notification_uuid, (context ->> 'run')::uuid
                    FROM (
                        SELECT n.bundle_id, n.environment, n.original_transaction_id, n.app_account_token, %5$s AS before, %4$s AS after,
                            %6$s AS notification_uuid
                        FROM new_rows n JOIN old_rows o ON o.bundle_id = n.bundle_id AND o.environment = n.environment AND o.%3$I = n.%3$I
                    ) c
                    WHERE c.before - 'signed_ms' - 'last_signed_ms' IS DISTINCT FROM c.after - 'signed_ms' - 'last_signed_ms';
                END IF;
                GET DIAGNOSTICS fed = ROW_COUNT;
                IF fed > 0 THEN
                    PERFORM pg_notify('app_store_changes', '');
                END IF;
                RETURN NULL;
            END;
            $body$
            $function$,
            spec.kind, spec.tbl, spec.key,
            app_store.change_row_sql(('app_store.' || spec.tbl)::regclass, 'n'),
            app_store.change_row_sql(('app_store.' || spec.tbl)::regclass, 'o'),
            spec.notification);
        EXECUTE format('DROP TRIGGER IF EXISTS record_inserts ON app_store.%I', spec.tbl);
        EXECUTE format(
            'CREATE TRIGGER record_inserts AFTER INSERT ON app_store.%I REFERENCING NEW TABLE AS new_rows '
            'FOR EACH STATEMENT EXECUTE FUNCTION app_store.record_%s_changes()', spec.tbl, spec.kind);
        EXECUTE format('DROP TRIGGER IF EXISTS record_updates ON app_store.%I', spec.tbl);
        EXECUTE format(
            'CREATE TRIGGER record_updates AFTER UPDATE ON app_store.%I REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows '
            'FOR EACH STATEMENT EXECUTE FUNCTION app_store.record_%s_changes()', spec.tbl, spec.kind);
    END LOOP;
END;
$generator$;


-- The change of shape, in one statement: it locks notifications and transactions (ACCESS EXCLUSIVE)
-- from here to the commit, so it comes last and makes a single round trip; nothing in it reads or
-- writes rows (the conversion of the rows comes after the commit, in batches).
DO $locked$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        ALTER TABLE app_store.notifications RENAME TO notification_rows;
    END IF;
    IF to_regclass('app_store.transaction_rows') IS NULL THEN
        ALTER TABLE app_store.transactions RENAME TO transaction_rows;
    END IF;
    ALTER TABLE app_store.notification_rows ADD COLUMN IF NOT EXISTS signed_payload_key bytea;
    -- When `prune` dropped the stored JWS (NULL: kept).
    ALTER TABLE app_store.notification_rows ADD COLUMN IF NOT EXISTS signed_payload_pruned_at timestamptz;
    ALTER TABLE app_store.notification_rows ALTER COLUMN signed_payload DROP NOT NULL;
    ALTER TABLE app_store.transaction_rows ADD COLUMN IF NOT EXISTS signed_transaction_key bytea;
    ALTER TABLE app_store.transaction_rows ALTER COLUMN signed_transaction DROP NOT NULL;

    -- The readers' tables, as they were.
    CREATE OR REPLACE VIEW app_store.notifications AS
    SELECT n.notification_uuid, n.notification_type, n.subtype, n.signed_date, n.environment, n.original_transaction_id,
        n.transaction_id, coalesce(n.signed_payload, app_store.jws_text(n.signed_payload_key)) AS signed_payload,
        n.source, n.recorded_at, n.bundle_id
    FROM app_store.notification_rows n;

    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('app_store.transactions')
            AND attname = 'original_purchase_date' AND NOT attisdropped) THEN
        CREATE OR REPLACE VIEW app_store.transactions AS
        SELECT t.transaction_id, t.original_transaction_id, t.product_id, t.product_type, t.purchase_date, t.expires_date,
            t.revocation_date, t.revocation_reason, t.is_upgraded, t.signed_date, t.environment,
            coalesce(t.signed_transaction, app_store.jws_text(t.signed_transaction_key)) AS signed_transaction,
            t.recorded_at, t.updated_at, t.app_account_token, t.in_app_ownership_type, t.subscription_group_identifier,
            t.web_order_line_item_id, t.quantity, t.price, t.currency, t.storefront, t.offer_type, t.offer_identifier,
            t.transaction_reason, t.revocation_type, t.revocation_percentage, t.app_transaction_id, t.bundle_id
        FROM app_store.transaction_rows t;
    END IF;
    DROP TRIGGER IF EXISTS insert_row ON app_store.notifications;
    CREATE TRIGGER insert_row INSTEAD OF INSERT ON app_store.notifications
        FOR EACH ROW EXECUTE FUNCTION app_store.insert_notification_row();
    DROP TRIGGER IF EXISTS insert_row ON app_store.transactions;
    CREATE TRIGGER insert_row INSTEAD OF INSERT ON app_store.transactions
        FOR EACH ROW EXECUTE FUNCTION app_store.insert_transaction_row();
    PERFORM app_store.create_change_triggers();
END
$locked$;

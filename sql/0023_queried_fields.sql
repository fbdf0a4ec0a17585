-- appstore-reconcile ledger, migration 0023: Apple's fields a team queries, kept as columns.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- These fields were kept only inside the stored JWS, out of reach of a query (and gone once
-- `prune` drops a notification's JWS). Every writer fills them from now on (runs, `serve`,
-- `ingest`, repairs); the rows written before take them from their stored JWS when `migrate` has
-- applied this file, in batches of a fraction of a second each, while the ledger stays in use
-- (app_store.convert_stored_jws, 0021's conversion, does this too now). Only a NULL column is
-- filled: what a writer wrote is never overwritten.
--
-- On app_store.transactions (JWSTransactionDecodedPayload):
--   original_purchase_date:  when the original transaction was bought;
--   offer_discount_type:     the offer's payment mode: FREE_TRIAL, PAY_AS_YOU_GO, PAY_UP_FRONT, ONE_TIME;
--   offer_period:            how long the offer lasts (ISO 8601: P1M);
--   storefront_id:           Apple's storefront ID (143441), beside `storefront`'s three letters;
--   previous_original_transaction_id: the originalTransactionId the purchase had before Apple
--                            migrated it.
-- On app_store.subscriptions, from the renewal info (JWSRenewalInfoDecodedPayload) the row's
-- renewal fields come from (renewal_signed_date):
--   renewal_date:            when the most recent purchase expires and the next renewal is due;
--   offer_discount_type, offer_period: the next renewal's offer (as offer_type and
--                            offer_identifier are);
--   eligible_win_back_offer_ids: the win-back offers the customer may redeem now;
-- and from its transactions:
--   app_transaction_id:      the app download's transaction ID (else the renewal info's);
--   previous_original_transaction_id: the subscription this one continues after a migration by
--                            Apple, kept once any of its transactions said so. The row it
--                            continues is the one whose original_transaction_id it names (same
--                            bundle_id and environment); the index below finds the new row from
--                            the old one.
--
-- A subscription row written by a repair from Apple's present state, whose renewal info no
-- stored notification carries, is filled only from its transactions: its renewal columns stay
-- NULL until the next notification or repair (an older renewal info would say an older renewal).

-- One batch of transactions after `after` (bundle_id, environment, transaction_id; NULL: from
-- the first): returns the last key of the batch, NULL when none was left.
CREATE OR REPLACE FUNCTION app_store.fill_transaction_columns_0023(after text[], batch integer) RETURNS text[]
    LANGUAGE plpgsql
AS $$
DECLARE
    last_key text[];
BEGIN
    SELECT ARRAY[b, e, t] INTO last_key FROM (
        SELECT bundle_id AS b, environment AS e, transaction_id AS t FROM app_store.transaction_rows
        WHERE after IS NULL OR (bundle_id, environment, transaction_id) > (after[1], after[2], after[3])
        ORDER BY bundle_id, environment, transaction_id LIMIT batch) s
    ORDER BY b DESC, e DESC, t DESC LIMIT 1;
    IF last_key IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE app_store.transaction_rows t SET
        original_purchase_date = d.original_purchase_date,
        offer_discount_type = d.offer_discount_type,
        offer_period = d.offer_period,
        storefront_id = d.storefront_id,
        previous_original_transaction_id = d.previous_original_transaction_id
    FROM (
        SELECT x.bundle_id, x.environment, x.transaction_id,
            coalesce(x.original_purchase_date, CASE WHEN jsonb_typeof(x.p -> 'originalPurchaseDate') = 'number'
                AND x.p ->> 'originalPurchaseDate' ~ '^-?[0-9]{1,15}$'
                THEN timestamptz 'epoch' + (x.p ->> 'originalPurchaseDate')::bigint * interval '1 millisecond' END)
                AS original_purchase_date,
            coalesce(x.offer_discount_type, x.p ->> 'offerDiscountType') AS offer_discount_type,
            coalesce(x.offer_period, x.p ->> 'offerPeriod') AS offer_period,
            coalesce(x.storefront_id, x.p ->> 'storefrontId') AS storefront_id,
            coalesce(x.previous_original_transaction_id, x.p ->> 'previousOriginalTransactionId')
                AS previous_original_transaction_id
        FROM (
            -- OFFSET 0: each payload decoded once.
            SELECT r.*, app_store.jws_payload(coalesce(r.signed_transaction, app_store.jws_text(r.signed_transaction_key))) AS p
            FROM app_store.transaction_rows r
            -- By key, row by row (as 0021's compact_transactions, for the same reason).
            JOIN (
                SELECT bundle_id, environment, transaction_id FROM app_store.transaction_rows
                WHERE after IS NULL OR (bundle_id, environment, transaction_id) > (after[1], after[2], after[3])
                ORDER BY bundle_id, environment, transaction_id LIMIT batch
            ) k ON r.bundle_id = k.bundle_id AND r.environment = k.environment AND r.transaction_id = k.transaction_id
            OFFSET 0
        ) x
        WHERE x.p IS NOT NULL
    ) d
    WHERE t.bundle_id = d.bundle_id AND t.environment = d.environment AND t.transaction_id = d.transaction_id
        AND (t.original_purchase_date, t.offer_discount_type, t.offer_period, t.storefront_id, t.previous_original_transaction_id)
            IS DISTINCT FROM
            (d.original_purchase_date, d.offer_discount_type, d.offer_period, d.storefront_id, d.previous_original_transaction_id);
    RETURN last_key;
END;
$$;

-- One batch of subscriptions after `after` (bundle_id, environment, original_transaction_id).
-- Run after the transactions' batches (their columns are read here).
CREATE OR REPLACE FUNCTION app_store.fill_subscription_columns_0023(after text[], batch integer) RETURNS text[]
    LANGUAGE plpgsql
AS $$
DECLARE
    last_key text[];
BEGIN
    SELECT ARRAY[b, e, o] INTO last_key FROM (
        SELECT bundle_id AS b, environment AS e, original_transaction_id AS o FROM app_store.subscriptions
        WHERE after IS NULL OR (bundle_id, environment, original_transaction_id) > (after[1], after[2], after[3])
        ORDER BY bundle_id, environment, original_transaction_id LIMIT batch) s
    ORDER BY b DESC, e DESC, o DESC LIMIT 1;
    IF last_key IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE app_store.subscriptions s SET
        renewal_date = d.renewal_date,
        offer_discount_type = d.offer_discount_type,
        offer_period = d.offer_period,
        app_transaction_id = d.app_transaction_id,
        eligible_win_back_offer_ids = d.eligible_win_back_offer_ids,
        previous_original_transaction_id = d.previous_original_transaction_id
    FROM (
        SELECT x.bundle_id, x.environment, x.original_transaction_id,
            coalesce(x.renewal_date, CASE WHEN jsonb_typeof(ri.p -> 'renewalDate') = 'number'
                AND ri.p ->> 'renewalDate' ~ '^-?[0-9]{1,15}$'
                THEN timestamptz 'epoch' + (ri.p ->> 'renewalDate')::bigint * interval '1 millisecond' END) AS renewal_date,
            coalesce(x.offer_discount_type, ri.p ->> 'offerDiscountType') AS offer_discount_type,
            coalesce(x.offer_period, ri.p ->> 'offerPeriod') AS offer_period,
            coalesce(x.app_transaction_id, tx.app_transaction_id, ri.p ->> 'appTransactionId') AS app_transaction_id,
            coalesce(x.eligible_win_back_offer_ids, CASE WHEN jsonb_typeof(ri.p -> 'eligibleWinBackOfferIds') = 'array'
                THEN ARRAY(SELECT jsonb_array_elements_text(ri.p -> 'eligibleWinBackOfferIds')) END) AS eligible_win_back_offer_ids,
            coalesce(x.previous_original_transaction_id, prev.previous_original_transaction_id) AS previous_original_transaction_id
        FROM app_store.subscriptions x
        JOIN (
            SELECT bundle_id, environment, original_transaction_id FROM app_store.subscriptions
            WHERE after IS NULL OR (bundle_id, environment, original_transaction_id) > (after[1], after[2], after[3])
            ORDER BY bundle_id, environment, original_transaction_id LIMIT batch
        ) k ON x.bundle_id = k.bundle_id AND x.environment = k.environment AND x.original_transaction_id = k.original_transaction_id
        -- The newest transaction (as 0006 chose it), and the newest that names a previous one.
        LEFT JOIN LATERAL (
            SELECT t.app_transaction_id FROM app_store.transaction_rows t
            WHERE t.original_transaction_id = x.original_transaction_id AND t.bundle_id = x.bundle_id AND t.environment = x.environment
            ORDER BY t.purchase_date DESC NULLS LAST, t.signed_date DESC, t.transaction_id DESC
            LIMIT 1
        ) tx ON true
        LEFT JOIN LATERAL (
            SELECT t.previous_original_transaction_id FROM app_store.transaction_rows t
            WHERE t.original_transaction_id = x.original_transaction_id AND t.bundle_id = x.bundle_id AND t.environment = x.environment
                AND t.previous_original_transaction_id IS NOT NULL
            ORDER BY t.purchase_date DESC NULLS LAST, t.signed_date DESC
            LIMIT 1
        ) prev ON true
        -- The renewal info the row's renewal fields came from: signed at renewal_signed_date
        -- (0019; a renewal info without a signedDate counts as signed with its notification).
        -- A row from before 0019 takes its newest notification's, as 0006 did.
        LEFT JOIN LATERAL (
            SELECT r.p
            FROM app_store.notifications n
            CROSS JOIN LATERAL (SELECT app_store.jws_payload(
                app_store.jws_payload(n.signed_payload) -> 'data' ->> 'signedRenewalInfo') AS p OFFSET 0) r
            WHERE n.original_transaction_id = x.original_transaction_id AND n.bundle_id = x.bundle_id
                AND n.environment = x.environment AND r.p IS NOT NULL
                AND n.signed_date <= x.last_signed_date
                AND (x.renewal_signed_date IS NULL
                    OR (CASE WHEN jsonb_typeof(r.p -> 'signedDate') = 'number' AND r.p ->> 'signedDate' ~ '^[0-9]{1,15}$'
                        THEN (r.p ->> 'signedDate')::bigint
                        ELSE round(extract(epoch FROM n.signed_date) * 1000)::bigint END)
                        = round(extract(epoch FROM x.renewal_signed_date) * 1000)::bigint)
            ORDER BY n.signed_date DESC, n.recorded_at DESC
            LIMIT 1
        ) ri ON true
    ) d
    WHERE s.bundle_id = d.bundle_id AND s.environment = d.environment AND s.original_transaction_id = d.original_transaction_id
        AND (s.renewal_date, s.offer_discount_type, s.offer_period, s.app_transaction_id, s.eligible_win_back_offer_ids,
             s.previous_original_transaction_id)
            IS DISTINCT FROM
            (d.renewal_date, d.offer_discount_type, d.offer_period, d.app_transaction_id, d.eligible_win_back_offer_ids,
             d.previous_original_transaction_id);
    RETURN last_key;
END;
$$;

-- 0021's conversion, with the fills above after it: one batch per call, in this order, each
-- recording where it stopped in the same transaction; false once all are done.
INSERT INTO app_store.signed_object_conversion (table_name)
VALUES ('transaction_rows: fields of 0023'), ('subscriptions: fields of 0023')
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
        ORDER BY array_position(ARRAY['notification_rows', 'transaction_rows', 'transaction_rows: fields of 0023',
            'subscriptions: fields of 0023'], table_name) NULLS LAST, table_name
        LIMIT 1 FOR UPDATE;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        IF progress.table_name = 'notification_rows' THEN
            last_notification := app_store.compact_notifications(progress.after[1]::uuid, batch);
            next_key := CASE WHEN last_notification IS NOT NULL THEN ARRAY[last_notification::text] END;
        ELSIF progress.table_name = 'transaction_rows' THEN
            next_key := app_store.compact_transactions(progress.after, batch);
        ELSIF progress.table_name = 'transaction_rows: fields of 0023' THEN
            next_key := app_store.fill_transaction_columns_0023(progress.after, batch);
        ELSIF progress.table_name = 'subscriptions: fields of 0023' THEN
            next_key := app_store.fill_subscription_columns_0023(progress.after, batch);
        ELSE
            next_key := NULL;  -- a later build's step: that build does it
        END IF;
        IF next_key IS NOT NULL THEN
            UPDATE app_store.signed_object_conversion SET after = next_key WHERE table_name = progress.table_name;
            RETURN true;
        END IF;
        UPDATE app_store.signed_object_conversion SET finished_at = now() WHERE table_name = progress.table_name;
    END LOOP;
END;
$$;

-- A writer of your own inserting through app_store.transactions (0021) fills the new columns too.
CREATE OR REPLACE FUNCTION app_store.insert_transaction_row() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO app_store.transaction_rows (transaction_id, original_transaction_id, product_id, product_type, purchase_date,
        expires_date, revocation_date, revocation_reason, is_upgraded, signed_date, environment, signed_transaction_key,
        recorded_at, updated_at, app_account_token, in_app_ownership_type, subscription_group_identifier,
        web_order_line_item_id, quantity, price, currency, storefront, offer_type, offer_identifier, transaction_reason,
        revocation_type, revocation_percentage, app_transaction_id, bundle_id, original_purchase_date, offer_discount_type,
        offer_period, storefront_id, previous_original_transaction_id)
    VALUES (NEW.transaction_id, NEW.original_transaction_id, NEW.product_id, NEW.product_type, NEW.purchase_date,
        NEW.expires_date, NEW.revocation_date, NEW.revocation_reason, NEW.is_upgraded, NEW.signed_date, NEW.environment,
        CASE WHEN NEW.signed_transaction IS NOT NULL THEN app_store.store_jws(NEW.signed_transaction) END,
        coalesce(NEW.recorded_at, now()), coalesce(NEW.updated_at, now()), NEW.app_account_token,
        NEW.in_app_ownership_type, NEW.subscription_group_identifier, NEW.web_order_line_item_id, NEW.quantity, NEW.price,
        NEW.currency, NEW.storefront, NEW.offer_type, NEW.offer_identifier, NEW.transaction_reason, NEW.revocation_type,
        NEW.revocation_percentage, NEW.app_transaction_id, NEW.bundle_id, NEW.original_purchase_date, NEW.offer_discount_type,
        NEW.offer_period, NEW.storefront_id, NEW.previous_original_transaction_id);
    RETURN NEW;
END;
$$;

-- The change of shape last, in one statement (it locks both tables to the commit; adding a
-- column without a default rewrites nothing). The change feed's triggers are made again so that
-- a change's before and after hold the new columns.
DO $locked$
BEGIN
    ALTER TABLE app_store.transaction_rows
        ADD COLUMN IF NOT EXISTS original_purchase_date timestamptz,
        ADD COLUMN IF NOT EXISTS offer_discount_type text,
        ADD COLUMN IF NOT EXISTS offer_period text,
        ADD COLUMN IF NOT EXISTS storefront_id text,
        ADD COLUMN IF NOT EXISTS previous_original_transaction_id text;
    ALTER TABLE app_store.subscriptions
        ADD COLUMN IF NOT EXISTS renewal_date timestamptz,
        ADD COLUMN IF NOT EXISTS offer_discount_type text,
        ADD COLUMN IF NOT EXISTS offer_period text,
        ADD COLUMN IF NOT EXISTS app_transaction_id text,
        ADD COLUMN IF NOT EXISTS eligible_win_back_offer_ids text[],
        ADD COLUMN IF NOT EXISTS previous_original_transaction_id text;
    CREATE INDEX IF NOT EXISTS subscriptions_previous_original_transaction_id_idx
        ON app_store.subscriptions (bundle_id, environment, previous_original_transaction_id)
        WHERE previous_original_transaction_id IS NOT NULL;

    CREATE OR REPLACE VIEW app_store.transactions AS
    SELECT t.transaction_id, t.original_transaction_id, t.product_id, t.product_type, t.purchase_date, t.expires_date,
        t.revocation_date, t.revocation_reason, t.is_upgraded, t.signed_date, t.environment,
        coalesce(t.signed_transaction, app_store.jws_text(t.signed_transaction_key)) AS signed_transaction,
        t.recorded_at, t.updated_at, t.app_account_token, t.in_app_ownership_type, t.subscription_group_identifier,
        t.web_order_line_item_id, t.quantity, t.price, t.currency, t.storefront, t.offer_type, t.offer_identifier,
        t.transaction_reason, t.revocation_type, t.revocation_percentage, t.app_transaction_id, t.bundle_id,
        t.original_purchase_date, t.offer_discount_type, t.offer_period, t.storefront_id, t.previous_original_transaction_id
    FROM app_store.transaction_rows t;
    PERFORM app_store.create_change_triggers();
END
$locked$;

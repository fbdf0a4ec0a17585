-- appstore-reconcile ledger, migration 0006: the columns a backend queries, and its entitlements.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- A backend asks "what may this customer use now?" by its own account token (the appAccountToken
-- its app set at purchase). The ledger kept those facts only inside the signed payloads; this
-- migration gives them columns, fills them for the rows recorded before it, indexes the token,
-- and adds the view app_store.entitlements.
--
-- Amended after migration 0014 keyed transactions and subscriptions by environment: the fills
-- below match rows by environment as well as by ID, so that running this file again (psql, or
-- `migrate` adopting a psql-applied ledger) never copies one environment's values onto the
-- other's row of the same ID. What it writes on a ledger without such pairs is unchanged, and a
-- ledger that applied the earlier text keeps it:
-- amends checksum 4ffeeade62975ccf64fe9d6503b4e07c4fd32b66deff15accdcd82a73fde1acb
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its columns and index on transactions are added only while it is a table (every earlier file has done its work by then). The earlier text:
-- amends checksum 9c44ee977a104e5a92a9ea63c53e7ffa34f1b526d8f7a68ce8d5bcfb5a34b401

-- The payload (second part) of a compact JWS (header.payload.signature, base64url without
-- padding), as jsonb; NULL when the text is not three base64url parts, or the payload is not a
-- JSON object in UTF-8. It does NOT verify anything: no signature, no certificate chain, no claim.
-- The tool verified each payload before storing it; this only reads back what is stored, so use
-- it on the ledger's own columns, never on text from outside.
-- PARALLEL UNSAFE, not SAFE: the EXCEPTION block starts a subtransaction at every call, and
-- PostgreSQL refuses subtransactions during a parallel operation ("cannot start subtransactions
-- during a parallel operation", in a worker and in the leader alike); unsafe keeps queries that
-- call it out of parallel plans. Only data errors (bad base64, bad UTF-8, bad JSON) and program
-- limits (JSON nested too deep) give NULL; anything else still fails.
CREATE OR REPLACE FUNCTION app_store.jws_payload(jws text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL UNSAFE
AS $$
DECLARE
    part    text := split_part(jws, '.', 2);
    decoded jsonb;
BEGIN
    IF jws !~ '^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+={0,2}\.[A-Za-z0-9_-]*$' THEN
        RETURN NULL;
    END IF;
    part := rtrim(part, '=');
    IF length(part) % 4 = 1 THEN
        RETURN NULL;  -- no base64 text has this length
    END IF;
    decoded := convert_from(
        decode(translate(part, '-_', '+/') || repeat('=', (4 - length(part) % 4) % 4), 'base64'),
        'UTF8')::jsonb;
    IF jsonb_typeof(decoded) <> 'object' THEN
        RETURN NULL;
    END IF;
    RETURN decoded;
EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
    RETURN NULL;
END
$$;

-- What a transaction's signed payload (JWSTransactionDecodedPayload) says, one column per field.
--   app_account_token:     the UUID the app set at purchase to name its customer (NULL: none set);
--   in_app_ownership_type: PURCHASED (the customer bought it) or FAMILY_SHARED (a family member
--                          did, and shares it);
--   web_order_line_item_id: Apple's ID of a subscription purchase event, renewals included;
--   quantity:              how many (consumables);
--   price:                 the price in milliunits (price × 1000) of `currency` (ISO 4217); Apple
--                          says not to reconcile revenue with it (App Store Connect's reports are
--                          the record);
--   storefront:            the App Store country or region, three letters;
--   offer_type:            1 introductory, 2 promotional, 3 offer code, 4 win-back; offer_identifier
--                          names the promotional offer or offer code;
--   transaction_reason:    PURCHASE or RENEWAL;
--   revocation_type:       REFUND_FULL, REFUND_PRORATED or FAMILY_REVOKE, with
--                          revocation_percentage: the share refunded, in milliunits (100000 = all);
--   app_transaction_id:    the app download's transaction ID.
DO $$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS app_account_token uuid;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS in_app_ownership_type text;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS subscription_group_identifier text;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS web_order_line_item_id text;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS quantity integer;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS price bigint;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS currency text;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS storefront text;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS offer_type smallint;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS offer_identifier text;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS transaction_reason text;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS revocation_type text;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS revocation_percentage integer;
        ALTER TABLE app_store.transactions ADD COLUMN IF NOT EXISTS app_transaction_id text;
    END IF;
END
$$;

-- What a backend needs of a subscription: from its transactions, the customer's token (else the
-- renewal info's token, the one for the upcoming renewal), its subscription group and who owns it
-- (as on transactions); from its renewal info (JWSRenewalInfoDecodedPayload), the next renewal:
--   expiration_intent:     why it expired: 1 the customer cancelled, 2 billing error, 3 no consent
--                          to a price increase, 4 product not available, 5 other;
--   price_increase_status: 0 the customer has not answered a price increase, 1 consented (or was
--                          told of one that needs no consent);
--   renewal_price:         the next renewal's price, in milliunits of `currency`;
--   offer_type, offer_identifier: the offer the next renewal uses, as on transactions.
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS app_account_token uuid;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS subscription_group_identifier text;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS in_app_ownership_type text;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS expiration_intent smallint;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS price_increase_status smallint;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS renewal_price bigint;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS currency text;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS offer_type smallint;
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS offer_identifier text;

-- Rows recorded before this migration take the columns from their stored payloads. Only a NULL
-- column is filled, so running this again never overwrites what the tool wrote, and a row with
-- nothing to fill is not written. A payload that does not decode leaves the columns NULL. The
-- token becomes a uuid only when it has a UUID's shape; a number only when the JSON value is a
-- whole number that fits the column (a string of digits is not a number).
UPDATE app_store.transactions t SET
    app_account_token = d.app_account_token,
    in_app_ownership_type = d.in_app_ownership_type,
    subscription_group_identifier = d.subscription_group_identifier,
    web_order_line_item_id = d.web_order_line_item_id,
    quantity = d.quantity,
    price = d.price,
    currency = d.currency,
    storefront = d.storefront,
    offer_type = d.offer_type,
    offer_identifier = d.offer_identifier,
    transaction_reason = d.transaction_reason,
    revocation_type = d.revocation_type,
    revocation_percentage = d.revocation_percentage,
    app_transaction_id = d.app_transaction_id
FROM (
    SELECT x.transaction_id, x.environment,
        coalesce(x.app_account_token, CASE WHEN x.p ->> 'appAccountToken'
            ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
            THEN (x.p ->> 'appAccountToken')::uuid END) AS app_account_token,
        coalesce(x.in_app_ownership_type, x.p ->> 'inAppOwnershipType') AS in_app_ownership_type,
        coalesce(x.subscription_group_identifier, x.p ->> 'subscriptionGroupIdentifier')
            AS subscription_group_identifier,
        coalesce(x.web_order_line_item_id, x.p ->> 'webOrderLineItemId') AS web_order_line_item_id,
        coalesce(x.quantity, CASE WHEN jsonb_typeof(x.p -> 'quantity') = 'number'
            AND x.p ->> 'quantity' ~ '^-?[0-9]{1,9}$' THEN (x.p ->> 'quantity')::integer END) AS quantity,
        coalesce(x.price, CASE WHEN jsonb_typeof(x.p -> 'price') = 'number'
            AND x.p ->> 'price' ~ '^-?[0-9]{1,18}$' THEN (x.p ->> 'price')::bigint END) AS price,
        coalesce(x.currency, x.p ->> 'currency') AS currency,
        coalesce(x.storefront, x.p ->> 'storefront') AS storefront,
        coalesce(x.offer_type, CASE WHEN jsonb_typeof(x.p -> 'offerType') = 'number'
            AND x.p ->> 'offerType' ~ '^-?[0-9]{1,4}$'
            THEN (x.p ->> 'offerType')::smallint END) AS offer_type,
        coalesce(x.offer_identifier, x.p ->> 'offerIdentifier') AS offer_identifier,
        coalesce(x.transaction_reason, x.p ->> 'transactionReason') AS transaction_reason,
        coalesce(x.revocation_type, x.p ->> 'revocationType') AS revocation_type,
        coalesce(x.revocation_percentage, CASE WHEN jsonb_typeof(x.p -> 'revocationPercentage') = 'number'
            AND x.p ->> 'revocationPercentage' ~ '^-?[0-9]{1,9}$'
            THEN (x.p ->> 'revocationPercentage')::integer END) AS revocation_percentage,
        coalesce(x.app_transaction_id, x.p ->> 'appTransactionId') AS app_transaction_id
    FROM (
        -- OFFSET 0: decode each payload once; without it the planner copies the call into every
        -- expression that reads p (some forty decodes per row).
        SELECT tx.*, app_store.jws_payload(tx.signed_transaction) AS p FROM app_store.transactions tx OFFSET 0
    ) x
    WHERE x.p IS NOT NULL
) d
WHERE t.transaction_id = d.transaction_id AND t.environment IS NOT DISTINCT FROM d.environment
  AND (t.app_account_token, t.in_app_ownership_type, t.subscription_group_identifier, t.web_order_line_item_id,
       t.quantity, t.price, t.currency, t.storefront, t.offer_type, t.offer_identifier, t.transaction_reason,
       t.revocation_type, t.revocation_percentage, t.app_transaction_id)
      IS DISTINCT FROM
      (d.app_account_token, d.in_app_ownership_type, d.subscription_group_identifier, d.web_order_line_item_id,
       d.quantity, d.price, d.currency, d.storefront, d.offer_type, d.offer_identifier, d.transaction_reason,
       d.revocation_type, d.revocation_percentage, d.app_transaction_id);

-- A subscription takes the transaction facts from its newest transaction row (the transactions
-- were filled just above), and the renewal facts from the renewal info of its newest notification
-- (by signedDate) whose data carries a signedRenewalInfo that decodes. Its token is the
-- transaction's, else the renewal info's.
UPDATE app_store.subscriptions s SET
    app_account_token = d.app_account_token,
    subscription_group_identifier = d.subscription_group_identifier,
    in_app_ownership_type = d.in_app_ownership_type,
    expiration_intent = d.expiration_intent,
    price_increase_status = d.price_increase_status,
    renewal_price = d.renewal_price,
    currency = d.currency,
    offer_type = d.offer_type,
    offer_identifier = d.offer_identifier
FROM (
    SELECT x.original_transaction_id, x.environment,
        coalesce(x.app_account_token, tx.app_account_token, CASE WHEN ri.p ->> 'appAccountToken'
            ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
            THEN (ri.p ->> 'appAccountToken')::uuid END) AS app_account_token,
        coalesce(x.subscription_group_identifier, tx.subscription_group_identifier)
            AS subscription_group_identifier,
        coalesce(x.in_app_ownership_type, tx.in_app_ownership_type) AS in_app_ownership_type,
        coalesce(x.expiration_intent, CASE WHEN jsonb_typeof(ri.p -> 'expirationIntent') = 'number'
            AND ri.p ->> 'expirationIntent' ~ '^-?[0-9]{1,4}$'
            THEN (ri.p ->> 'expirationIntent')::smallint END) AS expiration_intent,
        coalesce(x.price_increase_status, CASE WHEN jsonb_typeof(ri.p -> 'priceIncreaseStatus') = 'number'
            AND ri.p ->> 'priceIncreaseStatus' ~ '^-?[0-9]{1,4}$'
            THEN (ri.p ->> 'priceIncreaseStatus')::smallint END) AS price_increase_status,
        coalesce(x.renewal_price, CASE WHEN jsonb_typeof(ri.p -> 'renewalPrice') = 'number'
            AND ri.p ->> 'renewalPrice' ~ '^-?[0-9]{1,18}$'
            THEN (ri.p ->> 'renewalPrice')::bigint END) AS renewal_price,
        coalesce(x.currency, ri.p ->> 'currency') AS currency,
        coalesce(x.offer_type, CASE WHEN jsonb_typeof(ri.p -> 'offerType') = 'number'
            AND ri.p ->> 'offerType' ~ '^-?[0-9]{1,4}$'
            THEN (ri.p ->> 'offerType')::smallint END) AS offer_type,
        coalesce(x.offer_identifier, ri.p ->> 'offerIdentifier') AS offer_identifier
    FROM app_store.subscriptions x
    LEFT JOIN LATERAL (
        SELECT t.app_account_token, t.subscription_group_identifier, t.in_app_ownership_type
        FROM app_store.transactions t
        WHERE t.original_transaction_id = x.original_transaction_id
            AND (x.environment IS NULL OR t.environment IS NOT DISTINCT FROM x.environment)
        ORDER BY t.purchase_date DESC NULLS LAST, t.signed_date DESC, t.transaction_id DESC
        LIMIT 1
    ) tx ON true
    LEFT JOIN LATERAL (
        SELECT r.p
        FROM app_store.notifications n
        CROSS JOIN LATERAL (SELECT app_store.jws_payload(
            app_store.jws_payload(n.signed_payload) -> 'data' ->> 'signedRenewalInfo') AS p OFFSET 0) r
        -- Not signed after the row's state: a row a repair wrote from Apple's present state
        -- may be newer than every stored notification, and older renewal facts must not fill it.
        WHERE n.original_transaction_id = x.original_transaction_id AND r.p IS NOT NULL
            AND (x.environment IS NULL OR n.environment IS NOT DISTINCT FROM x.environment)
            AND n.signed_date <= x.last_signed_date
        ORDER BY n.signed_date DESC, n.recorded_at DESC
        LIMIT 1
    ) ri ON true
) d
WHERE s.original_transaction_id = d.original_transaction_id AND s.environment IS NOT DISTINCT FROM d.environment
  AND (s.app_account_token, s.subscription_group_identifier, s.in_app_ownership_type, s.expiration_intent,
       s.price_increase_status, s.renewal_price, s.currency, s.offer_type, s.offer_identifier)
      IS DISTINCT FROM
      (d.app_account_token, d.subscription_group_identifier, d.in_app_ownership_type, d.expiration_intent,
       d.price_increase_status, d.renewal_price, d.currency, d.offer_type, d.offer_identifier);

-- A backend looks its customer up by the token it gave the app.
DO $$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        CREATE INDEX IF NOT EXISTS transactions_app_account_token_idx
            ON app_store.transactions (app_account_token) WHERE app_account_token IS NOT NULL;
    END IF;
END
$$;
CREATE INDEX IF NOT EXISTS subscriptions_app_account_token_idx
    ON app_store.subscriptions (app_account_token) WHERE app_account_token IS NOT NULL;

-- What grants access now: one row per purchase, per environment (Production, Sandbox; NULL for a
-- row whose environment the ledger could not tell). A backend reads it by app_account_token.
--   Auto-renewable subscriptions, by Apple's status (app_store.subscriptions.status):
--     1 active: the current period is paid for (or free under an offer), access until expires_date. A row
--       whose expires_date has passed says the ledger has not yet heard of the renewal or the
--       expiry; it grants nothing until it has (a run of the reconciler brings it up to date);
--     4 billing grace period: the renewal's payment failed, and the developer chose to keep
--       service on while Apple retries, until grace_period_expires_date;
--     3 billing retry (without grace period): the period ended unpaid; Apple still tries to
--       collect, but service stops until it succeeds (status 1 again);
--     2 expired and 5 revoked (refunded, or no longer shared through Family Sharing): none.
--   Non-consumables (app_store.transactions): a one-time purchase grants access for good, unless
--     revoked: the newest signed version of the purchase (per originalTransactionId) counts, and
--     a revocation_date there (refund, or Family Sharing revoked) means no access. A purchase
--     shared through Family Sharing (FAMILY_SHARED) grants access like one PURCHASED. expires_date
--     and status are NULL.
--   Consumables and non-renewing subscriptions are not here: a consumable is used up once
--     delivered (the app counts what is left), and a non-renewing subscription's term is the app's
--     to set and track (Apple does not renew or expire it).
-- Amended after migration 0020 added bundle_id to the view as its last column: run again (psql,
-- or `migrate` adopting a psql-applied ledger), this file leaves a view that has it alone, since
-- CREATE OR REPLACE VIEW cannot drop a column. A ledger that applied the earlier text keeps it:
-- amends checksum ad61d4a158c953af518af0b1ae9e78c0846afd8836a6efc6cc1f5d712c9dbf99
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
        WHERE attrelid = to_regclass('app_store.entitlements') AND attname = 'bundle_id' AND NOT attisdropped) THEN
    CREATE OR REPLACE VIEW app_store.entitlements AS
    SELECT s.environment, s.app_account_token, s.original_transaction_id, s.product_id,
           'Auto-Renewable Subscription'::text AS product_type,
           s.subscription_group_identifier, s.in_app_ownership_type, s.expires_date, s.status
    FROM app_store.subscriptions s
    WHERE (s.status = 1 AND (s.expires_date IS NULL OR s.expires_date > now()))
       OR (s.status = 4 AND (s.grace_period_expires_date IS NULL OR s.grace_period_expires_date > now()))
    UNION ALL
    -- The newest row of a purchase is the one no other row of it (same environment and
    -- originalTransactionId) follows, by signed_date then transaction_id. Written as NOT EXISTS rather
    -- than DISTINCT ON so that a lookup by app_account_token (or original_transaction_id) reaches the
    -- transactions' indexes instead of sorting every non-consumable.
    SELECT t.environment, t.app_account_token, t.original_transaction_id, t.product_id, t.product_type,
           t.subscription_group_identifier, t.in_app_ownership_type, NULL::timestamptz AS expires_date,
           NULL::smallint AS status
    FROM app_store.transactions t
    WHERE t.product_type = 'Non-Consumable'
      AND t.revocation_date IS NULL
      AND NOT EXISTS (
          SELECT 1 FROM app_store.transactions n
          WHERE n.original_transaction_id = t.original_transaction_id
            AND n.environment IS NOT DISTINCT FROM t.environment
            AND n.product_type = 'Non-Consumable'
            AND (n.signed_date, n.transaction_id) > (t.signed_date, t.transaction_id));
    END IF;
END
$$;

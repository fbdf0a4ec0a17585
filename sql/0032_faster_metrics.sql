-- appstore-reconcile ledger, migration 0032: the metrics faster; the periods' storefront.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- Issue 65. Changes to migration 0031's functions, every figure unchanged (the suite's
-- ground-truth tests hold both):
--   * app_store.duration_days is one expression (a SQL function with a WHERE is not inlined, and
--     ran once per period); app_store.metrics runs without JIT (at 100,000 subscriptions JIT spent
--     about 4 s compiling its plan) and computes every window function in one frame: a fifth to a quarter
--     less of the server's CPU (docs/performance.md, part 14);
--   * the periods carry the transaction's storefront (`subscription_periods.storefront`, added
--     last): the key, with the product and the price, of Apple's price points;
--   * app_store.price_points holds sets of Apple's price points (`metrics --price-points`: a set
--     loaded, used and deleted in one transaction, so no one else sees it), and app_store.metrics
--     takes a set (`price_set`, last): a paid period that matches a point earns Apple's proceeds
--     instead of the 70% / 85% estimate; its last column, proceeds_estimated, counts the paid
--     periods started in the interval whose proceeds are the estimate.

CREATE OR REPLACE FUNCTION app_store.duration_days(duration text) RETURNS numeric
    LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN duration ~ '^P[1-9][0-9]{0,2}[DWMY]$' THEN substring(duration FROM 2 FOR length(duration) - 2)::numeric
        * CASE right(duration, 1) WHEN 'D' THEN 1 WHEN 'W' THEN 7 WHEN 'M' THEN 30.4375 WHEN 'Y' THEN 365.25 END END
$$;

-- Apple's price points (App Store Connect's subscriptionPricePoints), in milliunits of the
-- territory's currency; `territory` is ISO 3166-1 alpha-3, as a transaction's storefront.
CREATE TABLE IF NOT EXISTS app_store.price_points (
    price_set uuid NOT NULL,
    product_id text NOT NULL,
    territory text NOT NULL,
    customer_price_milliunits bigint NOT NULL CHECK (customer_price_milliunits > 0),
    proceeds_milliunits bigint NOT NULL CHECK (proceeds_milliunits BETWEEN 0 AND customer_price_milliunits),
    proceeds_year2_milliunits bigint NOT NULL CHECK (proceeds_year2_milliunits BETWEEN 0 AND customer_price_milliunits),
    loaded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (price_set, product_id, territory, customer_price_milliunits)
);

DROP VIEW IF EXISTS app_store.subscription_periods;
DROP FUNCTION IF EXISTS app_store.subscription_periods_known_at(timestamptz);
DROP FUNCTION IF EXISTS app_store.transaction_rows_known_at(timestamptz);
DROP FUNCTION IF EXISTS app_store.metrics(timestamptz, timestamptz, text, text, text, boolean, timestamptz, boolean, timestamptz);
DROP FUNCTION IF EXISTS app_store.metrics(timestamptz, timestamptz, text, text, text, boolean, timestamptz, boolean, timestamptz, uuid);

CREATE OR REPLACE FUNCTION app_store.transaction_rows_known_at(known_at timestamptz) RETURNS TABLE (
    bundle_id text, environment text, original_transaction_id text, transaction_id text, product_id text, product_type text,
    purchase_date timestamptz, expires_date timestamptz, revocation_date timestamptz, is_upgraded boolean, offer_type smallint,
    offer_discount_type text, price bigint, currency text, in_app_ownership_type text, revocation_type text,
    revocation_percentage integer, transaction_reason text, storefront text
)
    LANGUAGE sql STABLE
AS $$
    SELECT t.bundle_id, t.environment, t.original_transaction_id, t.transaction_id, t.product_id, t.product_type, t.purchase_date,
        t.expires_date, t.revocation_date, t.is_upgraded, t.offer_type, t.offer_discount_type, t.price, t.currency,
        t.in_app_ownership_type, t.revocation_type, t.revocation_percentage, t.transaction_reason, t.storefront
    FROM app_store.transaction_rows t
    WHERE known_at IS NULL
    UNION ALL
    SELECT c.bundle_id, c.environment, c.original_transaction_id, c.a ->> 'transaction_id', c.a ->> 'product_id', c.a ->> 'product_type',
        app_store.ms_time(c.a ->> 'purchase_ms'), app_store.ms_time(c.a ->> 'expires_ms'), app_store.ms_time(c.a ->> 'revocation_ms'),
        (c.a ->> 'is_upgraded')::boolean, (c.a ->> 'offer_type')::smallint, c.a ->> 'offer_discount_type', (c.a ->> 'price')::bigint,
        c.a ->> 'currency', c.a ->> 'in_app_ownership_type', c.a ->> 'revocation_type', (c.a ->> 'revocation_percentage')::integer,
        c.a ->> 'transaction_reason', c.a ->> 'storefront'
    FROM (
        SELECT DISTINCT ON (ch.bundle_id, ch.environment, ch.after ->> 'transaction_id')
            ch.bundle_id, ch.environment, ch.original_transaction_id, ch.after AS a
        FROM app_store.changes ch
        WHERE known_at IS NOT NULL AND ch.kind = 'transaction' AND ch.changed_at <= known_at
        ORDER BY ch.bundle_id, ch.environment, ch.after ->> 'transaction_id', ch.id DESC
    ) c
$$;

CREATE OR REPLACE FUNCTION app_store.subscription_periods_known_at(known_at timestamptz) RETURNS TABLE (
    bundle_id text, environment text, original_transaction_id text, transaction_id text, product_id text, starts_at timestamptz,
    ends_at timestamptz, is_trial boolean, offer_discount_type text, price_milliunits bigint, currency text, period_days numeric,
    family_shared boolean, refunded_at timestamptz, refund_milliunits bigint, duration text, transaction_reason text, is_upgraded boolean,
    revocation_date timestamptz, revocation_type text, access_ends_at timestamptz, access_ends_without_grace_at timestamptz,
    storefront text
)
    LANGUAGE sql STABLE
AS $$
SELECT p.bundle_id, p.environment, p.original_transaction_id, p.transaction_id, p.product_id, p.starts_at, p.ends_at,
    p.is_trial, p.offer_discount_type, p.price_milliunits, p.currency, app_store.duration_days(p.duration) AS period_days,
    p.family_shared,
    CASE WHEN p.refund THEN p.revocation_date END AS refunded_at,
    CASE WHEN NOT p.refund THEN NULL
        WHEN p.revocation_type = 'REFUND_PRORATED' THEN round(p.price_milliunits * coalesce(p.revocation_percentage, 100000) / 100000.0)::bigint
        ELSE p.price_milliunits
    END AS refund_milliunits,
    p.duration, p.transaction_reason, p.is_upgraded, p.revocation_date, p.revocation_type,
    least(p.ends_at, p.revocation_date,
        lead(p.starts_at) OVER (PARTITION BY p.bundle_id, p.environment, p.original_transaction_id ORDER BY p.starts_at, p.transaction_id)
    ) AS access_ends_at,
    least(p.expires_at, p.revocation_date,
        lead(p.starts_at) OVER (PARTITION BY p.bundle_id, p.environment, p.original_transaction_id ORDER BY p.starts_at, p.transaction_id)
    ) AS access_ends_without_grace_at,
    p.storefront
FROM (
    SELECT t.bundle_id, t.environment, t.original_transaction_id, t.transaction_id, t.product_id,
        t.purchase_date AS starts_at,
        CASE WHEN s.grace_period_expires_date > t.expires_date AND t.expires_date = s.expires_date
            THEN s.grace_period_expires_date ELSE t.expires_date END AS ends_at,
        t.expires_date AS expires_at,
        coalesce(t.offer_discount_type = 'FREE_TRIAL', false) AS is_trial,
        t.offer_discount_type, t.price AS price_milliunits, t.currency,
        coalesce(c.duration, d.duration) AS duration,
        coalesce(t.in_app_ownership_type = 'FAMILY_SHARED', false) AS family_shared,
        t.revocation_date IS NOT NULL AND NOT coalesce(t.is_upgraded, false)
            AND (t.revocation_type IN ('REFUND_FULL', 'REFUND_PRORATED')
                OR (t.revocation_type IS NULL AND coalesce(t.in_app_ownership_type, 'PURCHASED') = 'PURCHASED')) AS refund,
        t.revocation_type, t.revocation_percentage, t.revocation_date, t.transaction_reason,
        coalesce(t.is_upgraded, false) AS is_upgraded, t.storefront
    FROM app_store.transaction_rows_known_at(known_at) t
    LEFT JOIN app_store.subscriptions_known_at(known_at) s
        ON (s.bundle_id, s.environment, s.original_transaction_id) = (t.bundle_id, t.environment, t.original_transaction_id)
    LEFT JOIN app_store.product_durations c ON c.product_id = t.product_id
    LEFT JOIN app_store.derived_product_durations d
        ON (d.bundle_id, d.environment, d.product_id) = (t.bundle_id, t.environment, t.product_id)
    WHERE t.product_type = 'Auto-Renewable Subscription' AND t.purchase_date IS NOT NULL AND t.expires_date IS NOT NULL
) p
$$;

-- The periods as the ledger holds them now.
CREATE OR REPLACE VIEW app_store.subscription_periods AS
SELECT * FROM app_store.subscription_periods_known_at(NULL);

CREATE OR REPLACE FUNCTION app_store.metrics(
    from_at timestamptz, to_at timestamptz, step text DEFAULT 'day', convention text DEFAULT 'exact',
    refunds_at text DEFAULT 'refund-date', small_business boolean DEFAULT false, as_of timestamptz DEFAULT now(),
    grace_active boolean DEFAULT true, known_at timestamptz DEFAULT NULL, price_set uuid DEFAULT NULL
) RETURNS TABLE (
    bundle_id text, environment text, interval_start timestamptz, interval_end timestamptz, currency text,
    active_subscriptions bigint, active_trials bigint, mrr_milliunits numeric, new_subscriptions bigint, trial_starts bigint,
    trial_conversions bigint, trials_ended bigint, trials_ended_converted bigint, churned bigint, churned_voluntary bigint,
    churned_billing bigint, churned_refund bigint, reactivations bigint, gross_milliunits numeric, refund_count bigint,
    refund_milliunits numeric, estimated_proceeds_milliunits numeric, active_unnormalised bigint, proceeds_estimated bigint
)
    LANGUAGE sql STABLE
    SET timezone = 'UTC'
    SET jit = off
AS $$
WITH intervals AS (
    SELECT s AS interval_start, s + ('1 ' || step)::interval AS interval_end
    FROM generate_series(date_trunc(step, from_at), to_at - interval '1 microsecond', ('1 ' || step)::interval) s
),
bounds AS (
    SELECT min(interval_start) AS first_start, max(interval_end) AS last_end FROM intervals
),
-- The periods counted (family members' are not), their access ending with the grace period or at
-- the expiry as `grace_active` says.
chosen AS (
    SELECT sp.bundle_id, sp.environment, sp.original_transaction_id, sp.transaction_id, sp.starts_at, sp.is_trial,
        sp.price_milliunits, sp.currency, sp.refunded_at, sp.refund_milliunits, sp.duration, sp.transaction_reason,
        sp.product_id, sp.storefront,
        CASE WHEN grace_active THEN sp.access_ends_at ELSE sp.access_ends_without_grace_at END AS access_ends_at
    FROM app_store.subscription_periods_known_at(known_at) sp
    WHERE NOT sp.family_shared
),
periods AS (
    SELECT c.*, s.expiration_intent, s.status,
        lag(c.is_trial) OVER w AS previous_is_trial,
        lag(c.access_ends_at) OVER w AS previous_access_ends_at,
        lead(c.starts_at) OVER w AS next_starts_at,
        lead(c.is_trial) OVER w AS next_is_trial,
        lead(c.transaction_reason) OVER w AS next_reason,
        row_number() OVER w AS number,
        -- The paid time before the period: the running sum through it less its own (one frame for
        -- every window function: one pass), in whole microseconds.
        sum(m.paid_microseconds) OVER w - m.paid_microseconds AS paid_microseconds_before,
        app_store.monthly_factor(c.duration, convention) AS factor,
        pp.customer_price_milliunits AS point_price, pp.proceeds_milliunits AS point_proceeds,
        pp.proceeds_year2_milliunits AS point_proceeds_year2
    FROM chosen c
    CROSS JOIN LATERAL (
        SELECT CASE WHEN c.is_trial THEN 0 ELSE round(date_part('epoch', c.access_ends_at - c.starts_at) * 1000000)::bigint END
            AS paid_microseconds
    ) m
    LEFT JOIN app_store.price_points pp
        ON pp.price_set = metrics.price_set AND NOT c.is_trial
        AND (pp.product_id, pp.territory, pp.customer_price_milliunits) = (c.product_id, c.storefront, c.price_milliunits)
    LEFT JOIN app_store.subscriptions_known_at(known_at) s
        ON (s.bundle_id, s.environment, s.original_transaction_id) = (c.bundle_id, c.environment, c.original_transaction_id)
    WINDOW w AS (PARTITION BY c.bundle_id, c.environment, c.original_transaction_id ORDER BY c.starts_at, c.transaction_id)
),
rated AS (
    SELECT p.*,
        -- Apple's proceeds where a price point matches (year 2's after a year of paid service),
        -- else the estimate: 70% in the first year, 85% after.
        CASE WHEN p.point_price IS NOT NULL THEN
            CASE WHEN small_business OR p.paid_microseconds_before >= 365 * 86400 * 1000000::bigint
                THEN p.point_proceeds_year2 ELSE p.point_proceeds END::numeric / p.point_price
            WHEN small_business OR p.paid_microseconds_before >= 365 * 86400 * 1000000::bigint THEN 0.85 ELSE 0.70
        END AS proceeds_share,
        p.access_ends_at <= as_of AND p.access_ends_at > p.starts_at AS ended,
        p.next_starts_at IS NULL OR (p.next_starts_at > p.access_ends_at AND p.next_reason IS DISTINCT FROM 'RENEWAL') AS lapsed,
        -- Why a subscription's access ended, as Apple said it then: the first EXPIRED notification
        -- of the subscription signed from that end until its next period.
        CASE WHEN NOT p.is_trial AND p.access_ends_at <= as_of
            AND (p.next_starts_at IS NULL OR (p.next_starts_at > p.access_ends_at AND p.next_reason IS DISTINCT FROM 'RENEWAL')) THEN
        (SELECT n.subtype FROM app_store.notifications n
         WHERE n.original_transaction_id = p.original_transaction_id AND n.bundle_id = p.bundle_id AND n.environment = p.environment
            AND n.notification_type = 'EXPIRED' AND n.signed_date >= p.access_ends_at AND (known_at IS NULL OR n.recorded_at <= known_at)
            AND (p.next_starts_at IS NULL OR n.signed_date < p.next_starts_at)
         ORDER BY n.signed_date LIMIT 1) END AS expired_subtype
    FROM periods p
),
-- Stocks: +1 when a period starts, -1 when its access ends; a change at instant t counts for the
-- intervals whose end is at or after t (active at an interval's end: started at or before it,
-- access not yet ended).
moves AS (
    SELECT r.bundle_id, r.environment, r.currency, r.starts_at AS at, 1 AS sign, r.is_trial, r.price_milliunits, r.factor
    FROM rated r WHERE r.access_ends_at > r.starts_at
    UNION ALL
    SELECT r.bundle_id, r.environment, r.currency, r.access_ends_at, -1, r.is_trial, r.price_milliunits, r.factor
    FROM rated r WHERE r.access_ends_at > r.starts_at
),
stocks AS MATERIALIZED (
    SELECT m.bundle_id, m.environment, m.currency,
        greatest(date_trunc(step, m.at - interval '1 microsecond'), (SELECT first_start FROM bounds) - ('1 ' || step)::interval) AS bucket,
        sum(m.sign) FILTER (WHERE NOT m.is_trial) AS paid,
        sum(m.sign) FILTER (WHERE m.is_trial) AS trials,
        sum(m.sign * round(m.price_milliunits * m.factor)) FILTER (WHERE NOT m.is_trial AND m.factor IS NOT NULL) AS mrr,
        sum(m.sign) FILTER (WHERE NOT m.is_trial AND m.factor IS NULL) AS unnormalised
    FROM moves m
    WHERE m.at - interval '1 microsecond' < (SELECT last_end FROM bounds)
    GROUP BY 1, 2, 3, 4
),
-- Flows: what happened within an interval, at the instant it happened.
events AS (
    SELECT r.bundle_id, r.environment, r.currency, r.starts_at AS at,
        (NOT r.is_trial AND r.number = 1)::int AS new_subscription,
        r.is_trial::int AS trial_start,
        (NOT r.is_trial AND r.previous_is_trial IS TRUE)::int AS trial_conversion,
        (NOT r.is_trial AND r.number > 1 AND r.previous_is_trial IS FALSE AND r.previous_access_ends_at < r.starts_at
            AND r.transaction_reason IS DISTINCT FROM 'RENEWAL')::int AS reactivation,
        CASE WHEN NOT r.is_trial THEN r.price_milliunits ELSE 0 END AS gross,
        CASE WHEN NOT r.is_trial THEN round(r.price_milliunits * r.proceeds_share) ELSE 0 END AS proceeds,
        0 AS trial_ended, 0 AS trial_ended_converted, NULL::text AS churn, 0 AS refund, 0 AS refund_amount,
        (NOT r.is_trial AND r.point_price IS NULL)::int AS estimated
    FROM rated r
    UNION ALL
    SELECT r.bundle_id, r.environment, r.currency, r.access_ends_at, 0, 0, 0, 0, 0, 0,
        r.is_trial::int, (r.is_trial AND r.next_is_trial IS FALSE)::int,
        CASE WHEN r.is_trial OR NOT r.lapsed THEN NULL
            WHEN r.refunded_at IS NOT NULL AND r.refunded_at <= r.access_ends_at THEN 'refund'
            WHEN r.expired_subtype IN ('VOLUNTARY', 'PRICE_INCREASE') THEN 'voluntary'
            WHEN r.expired_subtype = 'BILLING_RETRY' THEN 'billing'
            WHEN r.expired_subtype IS NOT NULL OR r.next_starts_at IS NOT NULL THEN 'other'
            WHEN r.expiration_intent IN (1, 3) THEN 'voluntary'
            WHEN r.expiration_intent = 2 OR r.status IN (3, 4) THEN 'billing'
            ELSE 'other'
        END,
        0, 0, 0
    FROM rated r WHERE r.ended
    UNION ALL
    SELECT r.bundle_id, r.environment, r.currency, CASE WHEN refunds_at = 'at-purchase' THEN r.starts_at ELSE r.refunded_at END,
        0, 0, 0, 0, 0, -round(r.refund_milliunits * r.proceeds_share), 0, 0, NULL, 1, r.refund_milliunits, 0
    FROM rated r WHERE r.refunded_at IS NOT NULL AND r.refunded_at <= as_of
),
flows AS (
    SELECT e.bundle_id, e.environment, e.currency, date_trunc(step, e.at) AS bucket,
        sum(e.new_subscription) AS new_subscriptions, sum(e.trial_start) AS trial_starts,
        sum(e.trial_conversion) AS trial_conversions, sum(e.reactivation) AS reactivations,
        sum(e.gross) AS gross, sum(e.proceeds) AS proceeds, sum(e.trial_ended) AS trials_ended,
        sum(e.trial_ended_converted) AS trials_ended_converted,
        count(e.churn) AS churned, count(*) FILTER (WHERE e.churn = 'voluntary') AS churned_voluntary,
        count(*) FILTER (WHERE e.churn = 'billing') AS churned_billing, count(*) FILTER (WHERE e.churn = 'refund') AS churned_refund,
        sum(e.refund) AS refund_count, sum(e.refund_amount) AS refund_amount, sum(e.estimated) AS estimated
    FROM events e
    WHERE e.at >= (SELECT first_start FROM bounds) AND e.at < (SELECT last_end FROM bounds)
    GROUP BY 1, 2, 3, 4
),
keys AS (
    SELECT DISTINCT r.bundle_id, r.environment, r.currency FROM rated r
),
-- The stocks at each interval's end: the running sum of the changes up to it (the changes before
-- the first interval are all in the bucket before it).
levels AS MATERIALIZED (
    SELECT k.bundle_id, k.environment, k.currency, b.bucket,
        sum(coalesce(st.paid, 0)) OVER w AS paid, sum(coalesce(st.trials, 0)) OVER w AS trials,
        sum(coalesce(st.mrr, 0)) OVER w AS mrr, sum(coalesce(st.unnormalised, 0)) OVER w AS unnormalised
    FROM keys k
    CROSS JOIN (
        SELECT interval_start AS bucket FROM intervals
        UNION ALL
        SELECT first_start - ('1 ' || step)::interval FROM bounds
    ) b
    LEFT JOIN stocks st ON (st.bundle_id, st.environment, st.currency, st.bucket) = (k.bundle_id, k.environment, k.currency, b.bucket)
    WINDOW w AS (PARTITION BY k.bundle_id, k.environment, k.currency ORDER BY b.bucket)
)
SELECT k.bundle_id, k.environment, i.interval_start, i.interval_end, k.currency,
    coalesce(st.paid, 0)::bigint, coalesce(st.trials, 0)::bigint, coalesce(st.mrr, 0),
    coalesce(f.new_subscriptions, 0)::bigint, coalesce(f.trial_starts, 0)::bigint, coalesce(f.trial_conversions, 0)::bigint,
    coalesce(f.trials_ended, 0)::bigint, coalesce(f.trials_ended_converted, 0)::bigint, coalesce(f.churned, 0)::bigint,
    coalesce(f.churned_voluntary, 0)::bigint, coalesce(f.churned_billing, 0)::bigint, coalesce(f.churned_refund, 0)::bigint,
    coalesce(f.reactivations, 0)::bigint, coalesce(f.gross, 0), coalesce(f.refund_count, 0)::bigint,
    coalesce(f.refund_amount, 0), coalesce(f.proceeds, 0), coalesce(st.unnormalised, 0)::bigint, coalesce(f.estimated, 0)::bigint
FROM keys k
CROSS JOIN intervals i
LEFT JOIN flows f ON (f.bundle_id, f.environment, f.currency, f.bucket) = (k.bundle_id, k.environment, k.currency, i.interval_start)
LEFT JOIN levels st ON (st.bundle_id, st.environment, st.currency, st.bucket) = (k.bundle_id, k.environment, k.currency, i.interval_start)
ORDER BY k.bundle_id, k.environment, i.interval_start, k.currency
$$;

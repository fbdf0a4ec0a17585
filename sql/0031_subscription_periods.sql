-- appstore-reconcile ledger, migration 0031: what the ledger is worth. One row per period of an
-- auto-renewable subscription (app_store.subscription_periods), and the metrics over them
-- (app_store.metrics): the queries `appstore-reconcile metrics` runs, and that a team can run itself.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- Issue 65. docs/metrics.md defines every column and metric and the four choices behind them.
-- These are operating metrics, exact on Apple's signed data, not accounting: Apple says not to use
-- a transaction's price or currency for revenue reconciliation or recognition (App Store Connect's
-- reports are the record).

-- The standard duration of a product, as the configuration's `products` gives it (ISO 8601: P1W,
-- P1M, P3M, P1Y, P3D). `metrics` writes the configured ones here before it reads; a product not
-- here has its duration derived from its periods (app_store.derived_product_durations).
CREATE TABLE IF NOT EXISTS app_store.product_durations (
    product_id    text PRIMARY KEY,
    duration      text NOT NULL CHECK (duration ~ '^P[1-9][0-9]{0,2}[DWMY]$'),
    configured_at timestamptz NOT NULL DEFAULT now()
);

-- A duration's length in days, the year taken as 365.25 days and the month as a twelfth of it
-- (30.4375): a monthly price normalised to a month is itself, a yearly one a twelfth of itself.
CREATE OR REPLACE FUNCTION app_store.duration_days(duration text) RETURNS numeric
    LANGUAGE sql IMMUTABLE
AS $$
    SELECT substring(duration FROM 2 FOR length(duration) - 2)::numeric
        * CASE right(duration, 1) WHEN 'D' THEN 1 WHEN 'W' THEN 7 WHEN 'M' THEN 30.4375 WHEN 'Y' THEN 365.25 END
    WHERE duration ~ '^P[1-9][0-9]{0,2}[DWMY]$'
$$;

-- The factor that turns one period's price into a month's under a convention: 'exact',
-- (365.25 / 12) / period_days; 'revenuecat', RevenueCat's published factors (a week ×4, a month ×1,
-- a year ÷12; n days ×30/n, n weeks ×4/n, n months ÷n, n years ÷12n).
CREATE OR REPLACE FUNCTION app_store.monthly_factor(duration text, convention text) RETURNS numeric
    LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE
        WHEN convention = 'revenuecat' AND right(duration, 1) = 'W' THEN 4 / app_store.duration_days(duration) * 7
        WHEN convention = 'revenuecat' AND right(duration, 1) = 'M' THEN 30.4375 / app_store.duration_days(duration)
        WHEN convention = 'revenuecat' AND right(duration, 1) = 'Y' THEN 365.25 / 12 / app_store.duration_days(duration)
        WHEN convention = 'revenuecat' AND right(duration, 1) = 'D' THEN 30 / app_store.duration_days(duration)
        ELSE (365.25 / 12) / app_store.duration_days(duration)
    END
$$;

-- A product's duration derived from its periods without an offer, each period's length in days
-- put in a band (6-8 a week, 13-15 two weeks, 27-33 a month, 58-63 two months, 88-94 three,
-- 178-186 six, 360-370 a year): the band most of its periods fall in. Periods outside every band
-- (Sandbox's accelerated renewals: minutes for a month) give no duration: such a product's periods
-- are left unnormalised, not guessed, unless the configuration names its duration.
CREATE OR REPLACE VIEW app_store.derived_product_durations AS
SELECT DISTINCT ON (bundle_id, environment, product_id) bundle_id, environment, product_id, duration, periods
FROM (
    SELECT bundle_id, environment, product_id, duration, count(*) AS periods
    FROM (
        SELECT t.bundle_id, t.environment, t.product_id,
            CASE
                WHEN d BETWEEN 6 AND 8 THEN 'P1W' WHEN d BETWEEN 13 AND 15 THEN 'P2W' WHEN d BETWEEN 27 AND 33 THEN 'P1M'
                WHEN d BETWEEN 58 AND 63 THEN 'P2M' WHEN d BETWEEN 88 AND 94 THEN 'P3M' WHEN d BETWEEN 178 AND 186 THEN 'P6M'
                WHEN d BETWEEN 360 AND 370 THEN 'P1Y'
            END AS duration
        FROM app_store.transaction_rows t,
            LATERAL (SELECT round(extract(epoch FROM t.expires_date - t.purchase_date) / 86400) AS d) length
        WHERE t.product_type = 'Auto-Renewable Subscription' AND t.offer_type IS NULL AND t.expires_date > t.purchase_date
    ) banded
    GROUP BY bundle_id, environment, product_id, duration
) counted
ORDER BY bundle_id, environment, product_id, periods DESC, duration NULLS LAST;

-- One row per period of an auto-renewable subscription (a transaction with an expiry).
--   starts_at:        the transaction's purchaseDate (a renewal's period starts at the old expiry);
--   ends_at:          its expiresDate, or the billing grace period's end when the subscription's last
--                     period ended in grace;
--   access_ends_at:   when the period's access ended: ends_at, or earlier its revocation (a refund, a
--                     Family Sharing revoke) or the start of the subscription's next period (an
--                     upgrade takes effect at once: the upgraded-from period ends there);
--   access_ends_without_grace_at: the same, the expiry taken in place of the grace period's end;
--   is_trial:         offerDiscountType FREE_TRIAL;
--   price_milliunits: Apple's price (9990 is 9.99 of currency);
--   period_days:      the product's standard duration in days (configured, else derived; null when
--                     neither: unnormalised); duration: the same as ISO 8601;
--   family_shared:    inAppOwnershipType FAMILY_SHARED (a family member's access, not a sale);
--   refunded_at, refund_milliunits: a refund (revocationType REFUND_FULL or REFUND_PRORATED, or a
--                     revocation of a purchase before Apple gave the type) and its amount, the price
--                     or its revocationPercentage share (milliunits of a percent: 50000 is half),
--                     rounded to the milliunit; an upgrade or a Family Sharing revoke is no refund.
-- The transactions' and subscriptions' rows as the ledger knew them at `known_at` (null: now),
-- rebuilt from the change feed (app_store.changes, migration 0007): for each row, the `after` of
-- its last change recorded at or before then. Only the columns the periods read. A change feed
-- pruned (`prune --changes-older-than`) cannot say what it no longer holds: `metrics
-- --as-known-at` refuses a time before the feed's first change.
-- Amended for migration 0032, which gives these functions and the view a column more and the
-- metrics a parameter more: when every file runs again, this one first drops 0032's shapes (the
-- functions' return types cannot be replaced), and 0032 then makes them again. The earlier text:
-- amends checksum bce26bc9d4fbfbfac9896b19f1bf8393882bdba0170c244897e48dccf4992570
DROP VIEW IF EXISTS app_store.subscription_periods;
DROP FUNCTION IF EXISTS app_store.subscription_periods_known_at(timestamptz);
DROP FUNCTION IF EXISTS app_store.transaction_rows_known_at(timestamptz);
DROP FUNCTION IF EXISTS app_store.metrics(timestamptz, timestamptz, text, text, text, boolean, timestamptz, boolean, timestamptz, uuid);

CREATE OR REPLACE FUNCTION app_store.ms_time(ms text) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE
AS $$ SELECT to_timestamp(ms::numeric / 1000) $$;

CREATE OR REPLACE FUNCTION app_store.transaction_rows_known_at(known_at timestamptz) RETURNS TABLE (
    bundle_id text, environment text, original_transaction_id text, transaction_id text, product_id text, product_type text,
    purchase_date timestamptz, expires_date timestamptz, revocation_date timestamptz, is_upgraded boolean, offer_type smallint,
    offer_discount_type text, price bigint, currency text, in_app_ownership_type text, revocation_type text,
    revocation_percentage integer, transaction_reason text
)
    LANGUAGE sql STABLE
AS $$
    SELECT t.bundle_id, t.environment, t.original_transaction_id, t.transaction_id, t.product_id, t.product_type, t.purchase_date,
        t.expires_date, t.revocation_date, t.is_upgraded, t.offer_type, t.offer_discount_type, t.price, t.currency,
        t.in_app_ownership_type, t.revocation_type, t.revocation_percentage, t.transaction_reason
    FROM app_store.transaction_rows t
    WHERE known_at IS NULL
    UNION ALL
    SELECT c.bundle_id, c.environment, c.original_transaction_id, c.a ->> 'transaction_id', c.a ->> 'product_id', c.a ->> 'product_type',
        app_store.ms_time(c.a ->> 'purchase_ms'), app_store.ms_time(c.a ->> 'expires_ms'), app_store.ms_time(c.a ->> 'revocation_ms'),
        (c.a ->> 'is_upgraded')::boolean, (c.a ->> 'offer_type')::smallint, c.a ->> 'offer_discount_type', (c.a ->> 'price')::bigint,
        c.a ->> 'currency', c.a ->> 'in_app_ownership_type', c.a ->> 'revocation_type', (c.a ->> 'revocation_percentage')::integer,
        c.a ->> 'transaction_reason'
    FROM (
        SELECT DISTINCT ON (ch.bundle_id, ch.environment, ch.after ->> 'transaction_id')
            ch.bundle_id, ch.environment, ch.original_transaction_id, ch.after AS a
        FROM app_store.changes ch
        WHERE known_at IS NOT NULL AND ch.kind = 'transaction' AND ch.changed_at <= known_at
        ORDER BY ch.bundle_id, ch.environment, ch.after ->> 'transaction_id', ch.id DESC
    ) c
$$;

CREATE OR REPLACE FUNCTION app_store.subscriptions_known_at(known_at timestamptz) RETURNS TABLE (
    bundle_id text, environment text, original_transaction_id text, status smallint, expires_date timestamptz,
    grace_period_expires_date timestamptz, expiration_intent smallint
)
    LANGUAGE sql STABLE
AS $$
    SELECT s.bundle_id, s.environment, s.original_transaction_id, s.status, s.expires_date, s.grace_period_expires_date, s.expiration_intent
    FROM app_store.subscriptions s
    WHERE known_at IS NULL
    UNION ALL
    SELECT c.bundle_id, c.environment, c.original_transaction_id, (c.a ->> 'status')::smallint, app_store.ms_time(c.a ->> 'expires_ms'),
        app_store.ms_time(c.a ->> 'grace_period_expires_ms'), (c.a ->> 'expiration_intent')::smallint
    FROM (
        SELECT DISTINCT ON (ch.bundle_id, ch.environment, ch.original_transaction_id)
            ch.bundle_id, ch.environment, ch.original_transaction_id, ch.after AS a
        FROM app_store.changes ch
        WHERE known_at IS NOT NULL AND ch.kind = 'subscription' AND ch.changed_at <= known_at
        ORDER BY ch.bundle_id, ch.environment, ch.original_transaction_id, ch.id DESC
    ) c
$$;

CREATE OR REPLACE FUNCTION app_store.subscription_periods_known_at(known_at timestamptz) RETURNS TABLE (
    bundle_id text, environment text, original_transaction_id text, transaction_id text, product_id text, starts_at timestamptz,
    ends_at timestamptz, is_trial boolean, offer_discount_type text, price_milliunits bigint, currency text, period_days numeric,
    family_shared boolean, refunded_at timestamptz, refund_milliunits bigint, duration text, transaction_reason text, is_upgraded boolean,
    revocation_date timestamptz, revocation_type text, access_ends_at timestamptz, access_ends_without_grace_at timestamptz
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
    ) AS access_ends_without_grace_at
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
        coalesce(t.is_upgraded, false) AS is_upgraded
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

CREATE INDEX IF NOT EXISTS transaction_rows_period_starts_idx
    ON app_store.transaction_rows (bundle_id, environment, purchase_date)
    WHERE product_type = 'Auto-Renewable Subscription';

-- The metrics of every App Store (bundle_id, environment) and currency of the ledger, per interval
-- of `step` (day, week, month; starting 00:00 UTC, weeks on Monday) from the one holding `from_at`
-- to the one holding the instant before `to_at`. Amounts in milliunits. docs/metrics.md defines
-- each; the choices: `convention` 'exact' or 'revenuecat' (MRR's factors), `refunds_at`
-- 'refund-date' or 'at-purchase' (where a refund is counted), `small_business` (Apple's Small
-- Business Program: 85% proceeds throughout), `as_of` (a period's access counts as ended, a churn,
-- only once it has ended by then), `grace_active` (billing grace time is access, or the access ends at
-- the expiry), `known_at` (the ledger as it was then, rebuilt from the change feed; null: now).
CREATE OR REPLACE FUNCTION app_store.metrics(
    from_at timestamptz, to_at timestamptz, step text DEFAULT 'day', convention text DEFAULT 'exact',
    refunds_at text DEFAULT 'refund-date', small_business boolean DEFAULT false, as_of timestamptz DEFAULT now(),
    grace_active boolean DEFAULT true, known_at timestamptz DEFAULT NULL
) RETURNS TABLE (
    bundle_id text, environment text, interval_start timestamptz, interval_end timestamptz, currency text,
    active_subscriptions bigint, active_trials bigint, mrr_milliunits numeric, new_subscriptions bigint, trial_starts bigint,
    trial_conversions bigint, trials_ended bigint, trials_ended_converted bigint, churned bigint, churned_voluntary bigint,
    churned_billing bigint, churned_refund bigint, reactivations bigint, gross_milliunits numeric, refund_count bigint,
    refund_milliunits numeric, estimated_proceeds_milliunits numeric, active_unnormalised bigint
)
    LANGUAGE sql STABLE
    SET timezone = 'UTC'
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
        coalesce(sum(extract(epoch FROM c.access_ends_at - c.starts_at)) FILTER (WHERE NOT c.is_trial)
            OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS paid_seconds_before,
        app_store.monthly_factor(c.duration, convention) AS factor
    FROM chosen c
    LEFT JOIN app_store.subscriptions_known_at(known_at) s
        ON (s.bundle_id, s.environment, s.original_transaction_id) = (c.bundle_id, c.environment, c.original_transaction_id)
    WINDOW w AS (PARTITION BY c.bundle_id, c.environment, c.original_transaction_id ORDER BY c.starts_at, c.transaction_id)
),
rated AS (
    SELECT p.*,
        CASE WHEN small_business OR p.paid_seconds_before >= 365 * 86400 THEN 0.85 ELSE 0.70 END AS proceeds_share,
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
        0 AS trial_ended, 0 AS trial_ended_converted, NULL::text AS churn, 0 AS refund, 0 AS refund_amount
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
        0, 0
    FROM rated r WHERE r.ended
    UNION ALL
    SELECT r.bundle_id, r.environment, r.currency, CASE WHEN refunds_at = 'at-purchase' THEN r.starts_at ELSE r.refunded_at END,
        0, 0, 0, 0, 0, -round(r.refund_milliunits * r.proceeds_share), 0, 0, NULL, 1, r.refund_milliunits
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
        sum(e.refund) AS refund_count, sum(e.refund_amount) AS refund_amount
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
    coalesce(f.refund_amount, 0), coalesce(f.proceeds, 0), coalesce(st.unnormalised, 0)::bigint
FROM keys k
CROSS JOIN intervals i
LEFT JOIN flows f ON (f.bundle_id, f.environment, f.currency, f.bucket) = (k.bundle_id, k.environment, k.currency, i.interval_start)
LEFT JOIN levels st ON (st.bundle_id, st.environment, st.currency, st.bucket) = (k.bundle_id, k.environment, k.currency, i.interval_start)
ORDER BY k.bundle_id, k.environment, i.interval_start, k.currency
$$;

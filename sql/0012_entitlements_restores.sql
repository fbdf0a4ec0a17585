-- appstore-reconcile ledger, migration 0012: a refunded purchase grants nothing, whichever of its
-- transactions is newest.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- 0006's view granted a non-consumable by the newest row of its purchase, by (signed_date,
-- transaction_id). But a purchase can hold several transactions: a restore on another device is a
-- new transaction ID under the same originalTransactionId, and Get Transaction History signs every
-- transaction at the time of the request, so pass 2 writes them all with one signed_date and the
-- tie fell to a comparison of transaction IDs as text. A restored copy refunded with the purchase,
-- or never revoked itself, then granted access to a refunded purchase. Now a non-consumable grants
-- access only while no transaction of its purchase (same environment and originalTransactionId)
-- is revoked; the newest row still stands for the purchase (one row per purchase), and
-- transactions_environment_customer_idx (0005) serves the lookup. Same columns, same order.
-- Amended after migration 0020 added bundle_id to the view as its last column: run again (psql,
-- or `migrate` adopting a psql-applied ledger), this file leaves a view that has it alone, since
-- CREATE OR REPLACE VIEW cannot drop a column. A ledger that applied the earlier text keeps it:
-- amends checksum 16a37dc4e87c95d97bbeb7711f6cfce628b31cd67e64ae43dec59709614cc649
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
    SELECT t.environment, t.app_account_token, t.original_transaction_id, t.product_id, t.product_type,
           t.subscription_group_identifier, t.in_app_ownership_type, NULL::timestamptz AS expires_date,
           NULL::smallint AS status
    FROM app_store.transactions t
    WHERE t.product_type = 'Non-Consumable'
      AND NOT EXISTS (
          SELECT 1 FROM app_store.transactions r
          WHERE r.original_transaction_id = t.original_transaction_id
            AND r.environment IS NOT DISTINCT FROM t.environment
            AND r.revocation_date IS NOT NULL)
      AND NOT EXISTS (
          SELECT 1 FROM app_store.transactions n
          WHERE n.original_transaction_id = t.original_transaction_id
            AND n.environment IS NOT DISTINCT FROM t.environment
            AND n.product_type = 'Non-Consumable'
            AND (n.signed_date, n.transaction_id) > (t.signed_date, t.transaction_id));
    END IF;
END
$$;

-- appstore-reconcile ledger, migration 0005: Apple accounts, and the environment of a subscription.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- Get Transaction History and Get All Subscription Statuses answer for a customer's whole Apple
-- Account in the app: every originalTransactionId it has (each subscription group, one-time and
-- family-shared purchases). Pass 2 works per account: it asks once, keeps one revision, and
-- records which originalTransactionIds the answers covered.
--
-- Amended for migration 0021, which makes app_store.notifications and app_store.transactions
-- views: its index on transactions is created only while it is a table (every earlier file has done its work by then). The earlier text:
-- amends checksum 79aae34edba67010174e038f245eb087345cb86fc4c1a69c78b2fcefcac8ec3c

-- One row per account pass 2 has asked Apple about, per environment. account_id is the
-- numerically smallest originalTransactionId known to be in the account (two accounts found to be
-- one merge under it).
--   revision:    Get Transaction History's revision (sort ASCENDING) after the last complete,
--                committed fetch: the next fetch starts there and returns only what changed since
--                (null: never fetched, or Apple refused the stored one);
--   verified_at: when pass 2 last compared the account with Apple's answer and committed what
--                differed (the database's clock); the gap rules select the account again only for
--                what the ledger records after it;
--   transactions_verified_at: the same, for a check that included the whole transaction history
--                (refunds, one-time purchases, missing transactions need it; the subscription
--                statuses alone set only verified_at).
CREATE TABLE IF NOT EXISTS app_store.accounts (
    environment text NOT NULL,
    account_id  text NOT NULL,
    revision    text,
    verified_at timestamptz,
    transactions_verified_at timestamptz,
    PRIMARY KEY (environment, account_id)
);

-- Which account each originalTransactionId belongs to, as Apple's answers showed it.
CREATE TABLE IF NOT EXISTS app_store.account_members (
    environment             text NOT NULL,
    original_transaction_id text NOT NULL,
    account_id              text NOT NULL,
    PRIMARY KEY (environment, original_transaction_id)
);
CREATE INDEX IF NOT EXISTS account_members_account_idx
    ON app_store.account_members (environment, account_id);

-- The environment of a subscription (Production, Sandbox): a ledger may hold both, and a run of
-- one environment never reads or writes the other's rows. Rows written before this migration
-- take it from their transactions or notifications.
ALTER TABLE app_store.subscriptions ADD COLUMN IF NOT EXISTS environment text;
UPDATE app_store.subscriptions s SET environment = coalesce(
    (SELECT t.environment FROM app_store.transactions t
     WHERE t.original_transaction_id = s.original_transaction_id AND t.environment IS NOT NULL LIMIT 1),
    (SELECT n.environment FROM app_store.notifications n
     WHERE n.original_transaction_id = s.original_transaction_id LIMIT 1))
WHERE s.environment IS NULL;
CREATE INDEX IF NOT EXISTS subscriptions_environment_idx
    ON app_store.subscriptions (environment, original_transaction_id);
DO $$
BEGIN
    IF to_regclass('app_store.notification_rows') IS NULL THEN
        CREATE INDEX IF NOT EXISTS transactions_environment_customer_idx
            ON app_store.transactions (environment, original_transaction_id);
    END IF;
END
$$;

-- app_store.history_revisions (0001) kept a revision per originalTransactionId without an
-- environment. It is no longer read or written: a revision is a cursor over an account, kept in
-- app_store.accounts. Its rows stay; an account's first repair after this migration fetches its
-- history once from the start.

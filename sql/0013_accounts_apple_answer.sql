-- appstore-reconcile ledger, migration 0013: accounts Apple does not know are settled, not asked
-- again every night.
-- Idempotent, like 0001: `psql -1 -f` works, and `migrate` adopts what psql applied.
--
-- When pass 2 asks about an account Apple answers it does not know (4040001 AccountNotFoundError,
-- 4040010 TransactionIdNotFoundError, 4000006 InvalidTransactionIdError), the account is recorded
-- as checked at that time, with Apple's answer here; it is selected again only when the ledger
-- records something new for it (as any verified account), not by every nightly run, whose exit 3
-- would otherwise repeat forever. A later answer for the account sets it back to NULL.
ALTER TABLE app_store.accounts ADD COLUMN IF NOT EXISTS apple_answer text;

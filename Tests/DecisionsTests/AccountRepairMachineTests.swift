import Decisions
import Foundation
import LedgerModel
import SignedData
import Testing

/// Pass 2's decisions for one account, event by event, without a database or Apple: which
/// requests it asks for, from which revision, who is in the account, what it writes and keeps.
@Suite struct AccountRepairMachineTests {
    static let pair = AppStorePair(bundleId: "com.example.repair", environment: .production)

    static func transaction(_ id: String, of customer: String, type: ProductKind = .autoRenewable, signedAt: Int64 = 1_790_000_000_000) -> TransactionPayload {
        var payload = TransactionPayload(transactionId: id, originalTransactionId: customer)
        payload.bundleId = pair.bundleId
        payload.productId = "monthly"
        payload.type = type
        payload.signedDate = signedAt
        payload.purchaseDate = signedAt - 1000
        payload.environment = .production
        return payload
    }

    typealias ProductKind = ProductType

    static func state(accountId: String? = nil, revision: String? = nil, members: [String] = [], subscriptions: [String] = [], transactions: [(String, String)] = [])
        -> StoredAccountState
    {
        var rows: [String: SubscriptionRecord] = [:]
        for customer in subscriptions {
            rows[customer] = SubscriptionRecord(
                originalTransactionId: customer, productId: "monthly", status: 1, expiresDate: nil, autoRenewStatus: 1, autoRenewProductId: "monthly",
                isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: 1_700_000_000), environment: "Production",
                bundleId: pair.bundleId
            )
        }
        let stored = transactions.map { id, customer in
            TransactionRecord(
                transactionId: id, originalTransactionId: customer, productId: "monthly", productType: "Auto-Renewable Subscription", purchaseDate: nil,
                expiresDate: nil, revocationDate: nil, revocationReason: nil, isUpgraded: nil, signedDate: Date(timeIntervalSince1970: 1_700_000_000),
                environment: "Production", bundleId: pair.bundleId, signedTransaction: "stored.\(id).jws"
            )
        }
        return StoredAccountState(accountId: accountId, revision: revision, members: members, subscriptions: rows, transactions: stored)
    }

    static func page(_ transactions: [TransactionPayload], final revision: String?) -> AccountRepairMachine.HistoryPage {
        .init(transactions: transactions.map { (signed: "signed.\($0.transactionId ?? "").jws", outcome: .verified($0)) }, finalRevision: revision)
    }

    static func machine(_ customer: String = "1000", reasons: [GapReason] = [.recoveredInWindow], history: Bool = true, dryRun: Bool = false)
        -> AccountRepairMachine
    {
        AccountRepairMachine(
            target: .init(customer: customer, reasons: reasons, needsTransactionHistory: history), pair: pair, dryRun: dryRun)
    }

    @Test func aTransactionIdThatIsNotDigitsIsReportedFailedWithoutAskingAnyone() {
        var machine = AccountRepairMachine(target: .init(customer: "abc'; DROP", reasons: [.named]), pair: Self.pair, dryRun: false)
        guard case .finish(let report) = machine.start() else { Issue.record("asked for something"); return }
        #expect(report.outcome == .failed)
        #expect(report.failure?.contains("not a transaction ID Apple issues") == true)
    }

    @Test func anAccountTheRunCheckedAlreadyIsSkipped() {
        var machine = Self.machine()
        #expect(machine.start().isReadAccount)
        guard case .skip = machine.accountRead(Self.state(), need: .nothing) else { Issue.record("not skipped"); return }
    }

    /// From the stored revision, unless the repair is named (someone believes a row Apple never
    /// touched is wrong): then the whole history.
    @Test(arguments: [([GapReason.recoveredInWindow], "r-7" as String?), ([GapReason.named], nil)])
    func theHistoryStartsFromTheStoredRevisionUnlessTheRepairIsNamed(reasons: [GapReason], expected: String?) {
        var machine = Self.machine(reasons: reasons)
        _ = machine.start()
        guard case .fetchHistory(let from) = machine.accountRead(Self.state(accountId: "1000", revision: "r-7", members: ["1000"]), need: .everything) else {
            Issue.record("no history asked"); return
        }
        #expect(from == expected)
    }

    /// A refused revision: the whole history, and the revision forgotten when Apple gives none.
    @Test func aRefusedRevisionStartsOverAndIsForgottenWithoutANewOne() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.accountRead(Self.state(accountId: "1000", revision: "stale", members: ["1000"], transactions: [("1001", "1000")]), need: .everything)
        guard case .fetchHistory(nil) = machine.revisionRefused() else { Issue.record("did not start over"); return }
        // A one-time purchase only: no statuses needed (none stored, none in the history).
        let action = machine.historyAnswered([Self.page([Self.transaction("1001", of: "1000", type: .consumable)], final: nil)])
        guard case .write(let batch, _) = action else { Issue.record("no write: \(action)"); return }
        #expect(batch.accounts.first?.revision == .forget)
        #expect(batch.accounts.first?.verified == true)
        // Refused again from the start: reported, not asked forever.
        var again = Self.machine()
        _ = again.start()
        _ = again.accountRead(Self.state(revision: "stale"), need: .everything)
        _ = again.revisionRefused()
        guard case .finish(let report) = again.revisionRefused() else { Issue.record("asked again"); return }
        #expect(report.outcome == .failed)
    }

    /// A payload of the answer that did not verify: the revision does not move past it and the
    /// account is not recorded as verified, so that it is selected and fetched again.
    @Test func anAnswerWithARejectedPayloadKeepsTheRevisionAndIsNotVerified() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.accountRead(Self.state(accountId: "1000", revision: "r-1", members: ["1000"], subscriptions: ["1000"]), need: .everything)
        var page = Self.page([Self.transaction("1002", of: "1000")], final: "r-2")
        page.transactions.append((signed: "bad.jws", outcome: .rejected(Rejection(.badSignature, "tampered"))))
        guard case .fetchStatuses = machine.historyAnswered([page]) else { Issue.record("statuses not asked"); return }
        guard case .write(let batch, _) = machine.statusesAnswered([]) else { Issue.record("no write"); return }
        #expect(batch.accounts.first?.revision == .unchanged)
        #expect(batch.accounts.first?.verified == false)
        #expect(batch.rejected.map(\.source) == ["transaction-history"])
        #expect(machine.report.rejected == 1)
    }

    @Test func aCleanAnswerStoresApplesNewRevision() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.accountRead(Self.state(accountId: "1000", revision: "r-1", members: ["1000"], subscriptions: ["1000"]), need: .everything)
        _ = machine.historyAnswered([Self.page([Self.transaction("1002", of: "1000")], final: "r-2")])
        guard case .write(let batch, _) = machine.statusesAnswered([]) else { Issue.record("no write"); return }
        #expect(batch.accounts.first?.revision == .store("r-2"))
        #expect(machine.report.fromStoredRevision)
    }

    /// The statuses were asked for this account earlier in the pass: only its history is asked.
    @Test func onlyTheHistoryIsAskedWhenTheStatusesWereAskedEarlierInThePass() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.accountRead(Self.state(subscriptions: ["1000"]), need: .transactionHistoryOnly)
        let action = machine.historyAnswered([Self.page([Self.transaction("1001", of: "1000")], final: "r")])
        guard case .write = action else { Issue.record("asked \(action)"); return }
        #expect(machine.report.subscriptionStatusesRequests == 0)
    }

    /// Apple names originalTransactionIds the ledger did not know were in the account: their rows
    /// are read, and the account's key is the numerically smallest ID it holds.
    @Test func membersAppleNamesAreReadAndTheKeyIsTheSmallestNumber() {
        var machine = Self.machine("20000")
        _ = machine.start()
        _ = machine.accountRead(Self.state(members: [], subscriptions: ["20000"]), need: .everything)
        _ = machine.historyAnswered([Self.page([Self.transaction("20001", of: "20000"), Self.transaction("9001", of: "9000")], final: "r")])
        guard case .readRows(let unknown) = machine.statusesAnswered([]) else { Issue.record("rows not read"); return }
        #expect(unknown == ["9000"])
        guard case .write(let batch, let members) = machine.rowsRead(subscriptions: [:], transactions: []) else { Issue.record("no write"); return }
        #expect(members == ["9000", "20000"])
        #expect(batch.accounts.first?.accountId == "9000")
        #expect(machine.report.account == "9000")
    }

    /// Apple refuses an account the ledger holds: recorded as checked with Apple's answer, so
    /// that it is not selected every night; a mistyped ID the ledger never held leaves no row.
    @Test func aRefusedAccountTheLedgerHoldsIsSettledAndAnUnknownOneLeavesNoRow() {
        var known = Self.machine()
        _ = known.start()
        _ = known.accountRead(Self.state(transactions: [("1001", "1000")]), need: .everything)
        guard case .recordRefusal(let batch) = known.appleRefused(answer: "4040010", description: "transactionIdNotFound") else {
            Issue.record("not settled"); return
        }
        #expect(batch.accounts.first?.appleAnswer == "4040010")
        #expect(batch.accounts.first?.revision == .unchanged)
        guard case .finish(let report) = known.refusalRecorded() else { Issue.record("did not finish"); return }
        #expect(report.outcome == .failed)
        #expect(report.failure == "Apple answered transactionIdNotFound")

        var unknown = Self.machine("123")
        _ = unknown.start()
        _ = unknown.accountRead(Self.state(), need: .everything)
        guard case .finish = unknown.appleRefused(answer: "4040010", description: "transactionIdNotFound") else { Issue.record("wrote a row"); return }
        var dry = Self.machine(dryRun: true)
        _ = dry.start()
        _ = dry.accountRead(Self.state(transactions: [("1001", "1000")]), need: .everything)
        guard case .finish = dry.appleRefused(answer: "4040010", description: "x") else { Issue.record("a dry run wrote"); return }
    }

    /// A dry run writes nothing: it counts the writes no other repair of the pass planned.
    @Test func aDryRunClaimsItsPlannedWritesAndReportsOnlyThoseItWasFirstTo() {
        var machine = Self.machine(dryRun: true)
        _ = machine.start()
        _ = machine.accountRead(Self.state(members: ["1000"]), need: .everything)
        _ = machine.historyAnswered([Self.page([Self.transaction("1001", of: "1000", type: .consumable)], final: "r")])
        guard case .claimPlannedWrites(let transactions, _, let members) = machine.statusesAnswered([]) else { Issue.record("no claim"); return }
        #expect(transactions == ["1001"])
        #expect(members == ["1000"])
        guard case .finish(let first) = machine.writesClaimed(transactions: ["1001"], subscriptions: []) else { return }
        #expect(first.outcome == .repaired)
        #expect(first.transactionsAdded == ["1001"])

        var second = Self.machine(dryRun: true)
        _ = second.start()
        _ = second.accountRead(Self.state(members: ["1000"]), need: .everything)
        _ = second.historyAnswered([Self.page([Self.transaction("1001", of: "1000", type: .consumable)], final: "r")])
        _ = second.statusesAnswered([])
        guard case .finish(let later) = second.writesClaimed(transactions: [], subscriptions: []) else { return }
        #expect(later.outcome == .unchanged)
    }

    /// What was written decides the report, not what was planned (a live write may have got there first).
    @Test func theReportSaysWhatWasWrittenNotWhatWasPlanned() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.accountRead(Self.state(members: ["1000"]), need: .everything)
        _ = machine.historyAnswered([Self.page([Self.transaction("1001", of: "1000", type: .consumable)], final: "r")])
        guard case .write = machine.statusesAnswered([]) else { Issue.record("no write"); return }
        guard case .finish(let report) = machine.written(LedgerBatchOutcome()) else { Issue.record("did not finish"); return }
        #expect(report.outcome == .unchanged)
        #expect(report.transactionsAdded.isEmpty)
    }
}

extension AccountRepairMachine.Action {
    var isReadAccount: Bool { if case .readAccount = self { true } else { false } }
}

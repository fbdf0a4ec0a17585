import AppStoreServerAPI
package import Decisions
package import Foundation
package import Ledger
import LedgerSupport
import SignedData

/// `customer`: one account's case, for a support engineer. The account is asked about as a named
/// repair asks (Get All Subscription Statuses and the whole Get Transaction History, verified), in
/// a dry run first: its changes are where Apple's answer differs from the ledger's rows, read
/// beside them. With `repair`, a second, real repair writes Apple's truth when they differ. Then
/// the notifications recorded for the account and what the entitlements view grants it now.
package struct CustomerLookup: Sendable {
    /// Whom to look up.
    package enum Subject: Sendable, Equatable {
        /// Any transaction ID of the account.
        case transactionId(String)
        /// The order ID of Apple's emailed receipt (Look Up Order ID: Production only).
        case orderId(String)
        /// The appAccountToken the app set: every account of the ledger carrying it.
        case appAccountToken(UUID)
    }

    package let repair: CustomerRepair
    /// The ledger's database: a repair holds `run`'s lock and is recorded as a `repair` run.
    package let databaseURL: DatabaseURL
    /// The app's Sandbox pair, for a Production lookup whose file lists it: asked about a
    /// transaction ID Production does not know (`ImportRoute.asksSandbox`, Apple's rule).
    package let sandbox: CustomerRepair?

    package init(repair: CustomerRepair, databaseURL: DatabaseURL, sandbox: CustomerRepair? = nil) {
        self.repair = repair
        self.databaseURL = databaseURL
        self.sandbox = repair.pair.environment == .production ? sandbox : nil
    }

    var store: LedgerStore { repair.store }
    var pair: AppStorePair { repair.pair }

    /// The case of each account the subject names (several only for an appAccountToken).
    package func cases(_ subject: Subject, repairing: Bool) async throws -> [CustomerCase] {
        var cases: [CustomerCase] = []
        for id in try await transactionIds(subject) {
            let found = try await lookUp(id, repairing: repairing)
            // A transaction ID Production does not know may be a TestFlight or App Review purchase.
            if case .transactionId = subject, let sandbox, let answer = found.answer,
                ImportRoute.thisPair(orSandbox: true).asksSandbox(afterAnswer: answer)
            {
                var inSandbox = try await CustomerLookup(repair: sandbox, databaseURL: databaseURL).lookUp(id, repairing: repairing).customerCase
                if inSandbox.failure == nil {
                    inSandbox.foundInEnvironment = sandbox.pair.environment.rawValue
                    cases.append(inSandbox)
                    continue
                }
            }
            cases.append(found.customerCase)
        }
        return cases
    }

    /// The transaction IDs to ask Apple with, one per account.
    func transactionIds(_ subject: Subject) async throws -> [String] {
        switch subject {
        case .transactionId(let id):
            guard CustomerRepair.isWellFormedTransactionId(id) else { throw NotATransactionId(text: id) }
            return [id]
        case .orderId(let orderId):
            do {
                let ids = try await repair.orderTransactionIds(orderId)
                guard let first = ids.first else {
                    throw CustomerNotFound(description: "Apple answers the order ID \(orderId) is invalid for this app (status 1)")
                }
                return [first]
            } catch let rejection as OrderNotVerified {
                throw CustomerNotFound(description: "order \(orderId): \(rejection.description): nothing is shown of it")
            }
        case .appAccountToken(let token):
            let customers = try await store.customers(withAppAccountToken: token, pair: pair)
            guard !customers.isEmpty else {
                throw CustomerNotFound(description: "no purchase in the ledger carries appAccountToken \(token.uuidString.lowercased()) (\(pair))")
            }
            return customers
        }
    }

    /// One account: compared in a dry run, repaired when asked and it differs, then read; with
    /// Apple's error code when it answered that it does not know the account.
    func lookUp(_ id: String, repairing: Bool) async throws -> (customerCase: CustomerCase, answer: String?) {
        let customer = try await store.customer(ofTransaction: id, pair: pair) ?? id
        let target = CustomerRepair.Target(customer: customer, transactionId: id, reasons: [.named])
        guard let report = try await repair.repair([target], dryRun: true).first(where: { _ in true }) else {
            throw CustomerNotFound(description: "the repair of \(id) reported nothing")
        }
        let members = Array(Set(report.members + [customer]))
        let ledger = Array(try await store.subscriptions(members, pair: pair).values)
        var repaired = false
        if repairing, report.outcome == .repaired {
            // As `repair --transaction-id`: under the lock, recorded in app_store.runs. A ledger
            // another run mended meanwhile (nothing left to write) agrees all the same.
            let written = try await repairRecorded(target)
            repaired = written == .repaired || written == .unchanged
        }
        let found = CustomerCase(
            ledger: ledger, report: report, notifications: try await store.recordedNotifications(of: members, pair: pair),
            entitlements: try await store.entitlements(of: members, pair: pair), repaired: repaired
        )
        return (found, report.appleAnswer)
    }
}

extension CustomerLookup {
    /// A real repair of the account, under `run`'s lock, recorded as a `repair` run.
    func repairRecorded(_ target: CustomerRepair.Target) async throws -> AccountRepairReport.Outcome? {
        let store = self.store
        let pair = self.pair
        let repair = self.repair
        return try await RunLock.withLock(databaseURL, store: store, logger: repair.logger, pair: pair, kind: .repair) {
            let runId = try await store.startRun(kind: .repair, pair: pair, windowStart: nil, windowEnd: nil)
            do {
                let outcome = try await repair.repair([target], dryRun: false, runId: runId).first(where: { _ in true })?.outcome
                var counts = RecoveryReport.Counts()
                counts.customersChecked = 1
                counts.customersRepaired = outcome == .repaired ? 1 : 0
                counts.customersFailed = outcome == .failed ? 1 : 0
                try await store.finishRun(runId, outcome: outcome == .failed ? .succeededWithRejections : .succeeded, countsJSON: RecoveryReport.countsJSON(counts))
                return outcome
            } catch {
                try? await store.finishRun(runId, outcome: RunOutcome(endingWith: error), countsJSON: "{}")
                throw error
            }
        }
    }
}

/// The subject names no account Apple or the ledger knows.
package struct CustomerNotFound: Error, CustomStringConvertible, Sendable {
    package var description: String
}

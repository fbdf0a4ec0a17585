import AppStoreServerAPI
package import Decisions
import Ledger
package import Logging
package import Reconciliation
import SignedData

extension Deployment {
    /// `customer`: the case of each account `subject` names in the one selected pair, its parts
    /// (verifier, API client, the ledger's store) made here as for every run.
    package func customerCases(_ subject: CustomerLookup.Subject, repairing: Bool, logger: Logger) async throws -> [CustomerCase] {
        let pair = try onlyPair()
        let verifier = try pair.verifier()
        let client = try pair.apiClient(logger: logger)
        let url = try databaseURL()
        return try await LedgerDatabase.withStore(url, logger: logger) { store in
            let repair = CustomerRepair(client: client, verifier: verifier, store: store, logger: logger)
            let sandbox = try pair.sandboxParts(logger: logger).map {
                CustomerRepair(client: $0.client, verifier: $0.verifier, store: store, logger: logger)
            }
            return try await CustomerLookup(repair: repair, databaseURL: url, sandbox: sandbox).cases(subject, repairing: repairing)
        }
    }
}

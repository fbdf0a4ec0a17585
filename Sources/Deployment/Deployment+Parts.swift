package import AppStoreServerAPI
import Ledger
package import Logging
package import Reconciliation
package import SignedData

/// The parts a pair's work is built from, each made here and nowhere else: the verifier of its
/// App Store's signed data and its client of Apple's API.
extension Deployment.Pair {
    /// The verifier of this pair's signed data (its app, its appAppleId in Production, its
    /// environment); `onlineChecks` for data received just now (`verify --online`, `serve`).
    package func verifier(onlineChecks: OnlineChecks? = nil) throws -> SignedDataVerifier {
        var configuration = try settings.verifierConfiguration()
        configuration.onlineChecks = onlineChecks
        return try SignedDataVerifier(configuration)
    }

    /// This pair's client of the App Store Server API: its own rate budget and retries. `adjust`
    /// sets a run's share of the rate and its retries; `warn` hears about a key file others can read.
    package func apiClient(
        logger: Logger, adjust: (AppStoreServerAPIConfiguration) -> AppStoreServerAPIConfiguration = { $0 }, warn: (String) -> Void = { _ in }
    ) throws -> AppStoreServerAPIClient {
        AppStoreServerAPIClient(configuration: adjust(try settings.apiConfiguration(warn: warn)), logger: logger)
    }

    /// The app's Sandbox pair's client and verifier, for a Production pair whose file lists it.
    package func sandboxParts(logger: Logger) throws -> ReconciliationRun.PairParts? {
        guard let sandboxSettings else { return nil }
        let sandbox = Deployment.Pair(pair: AppStorePair(bundleId: pair.bundleId, environment: .sandbox), settings: sandboxSettings)
        return ReconciliationRun.PairParts(client: try sandbox.apiClient(logger: logger), verifier: try sandbox.verifier())
    }
}

extension Deployment {
    /// Checks every selected app's facts query against the ledger's database (parsed, its
    /// columns and types; not run), before any pair records or sends anything: one broken file
    /// stops the whole command (`RefundFactsError`, exit 78), not only its own pair.
    package func checkRefundFacts(timeout: Duration, logger: Logger) async throws {
        let queries = pairs.compactMap { pair in pair.refundFacts.map { (pair: pair.pair, query: $0) } }
        guard !queries.isEmpty else { return }
        try await LedgerDatabase.withStore(try databaseURL(), logger: logger) { store in
            for (pair, query) in queries { try await store.check(query, pair: pair, timeout: timeout) }
        }
    }
}

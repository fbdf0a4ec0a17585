import AppStoreServerAPI
import Logging
import SignedData

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
}

package import AppStoreServerAPI
package import AppStoreSimulator
@testable package import Decisions
package import Foundation
package import Ledger
package import Logging
package import PostgresNIO
package import Reconciliation
package import SignedData

/// A simulated App Store, a ledger in a fresh database filled with what a live server received,
/// and the pieces of a recovery run wired to both.
package struct RecoveryHarness: Sendable {
    package let api: SimulatedAPI
    package let logger: Logger

    /// A sandbox world (Apple never retries there) whose outage covers most of its history, so
    /// that every kind of notification is missed somewhere.
    /// - Parameter now: the world's present; harnesses built with the same one (and seed) hold the same world.
    /// - Parameter apple: the PKI and the team key to share with other harnesses (several apps of
    ///   one team, signed by one Apple); by default, a PKI and a key of its own.
    package init(customers: Int = 150, seed: UInt64 = 21, environment: AppStoreEnvironment = .sandbox, outageHours: Double = 96, options: SimulatorOptions = SimulatorOptions(), silenced: Set<String> = [], now: Date = Date(),
        apple: (pki: TestPKI, credentials: SimulatorCredentials)? = nil, configure: (inout Scenario.Configuration) -> Void = { _ in }) throws {
        var configuration = Scenario.Configuration()
        configuration.now = now
        configuration.seed = seed
        configuration.customers = customers
        configuration.environment = environment
        let now = configuration.now
        configuration.outage = now.addingTimeInterval(-(outageHours + 1) * 3600)..<now.addingTimeInterval(-3600)
        configuration.silencedNotifications = silenced
        configure(&configuration)
        // `apple`: one Apple (one PKI) and one team key shared with other harnesses, as several
        // apps of one team are.
        api = try SimulatedAPI(scenario: Scenario(configuration), options: options, credentials: apple?.credentials ?? SimulatorCredentials(), pki: apple?.pki)
        var logger = Logger(label: "recovery-tests")
        logger.logLevel = .error
        self.logger = logger
    }

    package var scenario: Scenario { api.scenario }

    /// The simulated App Store: its app and environment.
    package var pair: AppStorePair { AppStorePair(bundleId: scenario.configuration.bundleId, environment: scenario.configuration.environment) }

    package func verifier() throws -> SignedDataVerifier {
        try SignedDataVerifier(api.verifierConfiguration)
    }

    package func client(_ baseURL: String) throws -> AppStoreServerAPIClient {
        AppStoreServerAPIClient(
            configuration: AppStoreServerAPIConfiguration(
                credentials: APICredentials(
                    issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: scenario.configuration.bundleId,
                    signingKey: api.credentials.privateKey
                ),
                environment: scenario.configuration.environment, baseURL: try APIBaseURL(baseURL),
                requestsPerSecond: Dictionary(uniqueKeysWithValues: Endpoint.allCases.map { ($0, 1000) })
            ),
            logger: logger
        )
    }

    /// The whole scenario as the window: everything Apple's history holds for it.
    package func window() throws -> OutageWindow {
        let configuration = scenario.configuration
        return try OutageWindow(
            start: configuration.now.addingTimeInterval(-configuration.history - 3600), end: Date(), environment: configuration.environment
        )
    }

    /// Records what a live server received, as its webhook would have, in batches.
    package func seedDeliveredNotifications(_ store: LedgerStore) async throws {
        let ingest = NotificationIngest(verifier: try verifier(), store: store)
        let delivered = scenario.deliveredNotifications
        for start in stride(from: 0, to: delivered.count, by: 200) {
            try await ingest.ingest(signedPayloads: delivered[start..<min(start + 200, delivered.count)].map { try api.signNotification($0) })
        }
    }

    package func repair(_ baseURL: String, _ store: LedgerStore, client: AppStoreServerAPIClient? = nil) throws -> CustomerRepair {
        CustomerRepair(client: try client ?? self.client(baseURL), verifier: try verifier(), store: store, logger: logger)
    }

    /// Every account's subscription rows (each subscription of the account) and transactions (of
    /// every purchase), compared field by field with the simulator's truth; the mismatches, described.
    package func mismatches(_ store: LedgerStore, accounts: [Scenario.Customer]? = nil) async throws -> [String] {
        var problems: [String] = []
        let accounts = accounts ?? scenario.customers
        let pair = AppStorePair(bundleId: scenario.configuration.bundleId, environment: scenario.configuration.environment)
        let rows = try await store.subscriptions(accounts.flatMap { $0.subscriptions.map(\.originalTransactionId) }, pair: pair)
        for customer in accounts {
            for subscription in customer.subscriptions {
                let id = subscription.originalTransactionId
                guard let row = rows[id] else {
                    problems.append("\(id): no subscription row")
                    continue
                }
                if row.status != subscription.subscriptionStatus?.rawValue {
                    problems.append("\(id): status \(String(describing: row.status)) ≠ \(String(describing: subscription.subscriptionStatus))")
                }
                if row.expiresDate?.unixMilliseconds != subscription.latestTransaction.expiresDate { problems.append("\(id): expiresDate") }
                if row.autoRenewStatus != subscription.renewalInfo?.autoRenewStatus { problems.append("\(id): autoRenewStatus") }
                if row.productId != subscription.latestTransaction.productId { problems.append("\(id): productId") }
                if row.environment != scenario.configuration.environment.rawValue { problems.append("\(id): environment") }
                if row.bundleId != scenario.configuration.bundleId { problems.append("\(id): bundleId") }
                // Migration 0023's columns.
                let renewal = subscription.renewalInfo
                if row.renewalDate?.unixMilliseconds != renewal?.renewalDate { problems.append("\(id): renewalDate") }
                if row.offerDiscountType != renewal?.offerDiscountType || row.offerPeriod != renewal?.offerPeriod {
                    problems.append("\(id): the next renewal's offer")
                }
                if row.eligibleWinBackOfferIds != renewal?.eligibleWinBackOfferIds { problems.append("\(id): eligibleWinBackOfferIds") }
                if row.appTransactionId != subscription.latestTransaction.appTransactionId { problems.append("\(id): appTransactionId") }
                if row.previousOriginalTransactionId != subscription.latestTransaction.previousOriginalTransactionId {
                    problems.append("\(id): previousOriginalTransactionId")
                }
            }
            let id = customer.originalTransactionId
            var truth: [String: TransactionPayload] = [:]
            for version in customer.transactionVersions { truth[version.transaction.transactionId!] = version.transaction }
            var stored: [String: TransactionRecord] = [:]
            for purchase in customer.purchases {
                for row in try await store.transactions(ofCustomer: purchase.originalTransactionId, pair: pair) { stored[row.transactionId] = row }
            }
            if Set(stored.keys) != Set(truth.keys) { problems.append("\(id): transactions \(stored.keys.sorted()) ≠ \(truth.keys.sorted())") }
            for (transactionId, expected) in truth {
                guard let row = stored[transactionId] else { continue }
                if row.purchaseDate?.unixMilliseconds != expected.purchaseDate || row.expiresDate?.unixMilliseconds != expected.expiresDate
                    || row.revocationDate?.unixMilliseconds != expected.revocationDate || row.revocationReason != expected.revocationReason
                    || row.originalPurchaseDate?.unixMilliseconds != expected.originalPurchaseDate
                    || row.offerDiscountType != expected.offerDiscountType || row.offerPeriod != expected.offerPeriod
                    || row.storefrontId != expected.storefrontId || row.previousOriginalTransactionId != expected.previousOriginalTransactionId
                {
                    problems.append("\(id): transaction \(transactionId) differs")
                }
            }
        }
        return problems
    }

    /// The accounts pass 2 asks Apple about in this world, sorted: both passes of the outage against a
    /// fresh ledger seeded with what was delivered. For a test that needs accounts pass 2 is sure to
    /// reach (it asks only where the evidence leaves doubt, so a missed notification alone is not enough).
    package func accountsPassTwoAsks() async throws -> [Int] {
        try await SimulatorServer.withRunning(api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: logger)
                try await seedDeliveredNotifications(store)
                let window = try window()
                let result = try await reconciliation(store, url, client: try self.client(baseURL))
                    .execute(.init(kind: .run, window: .fixed(start: window.start, end: window.end), mode: .apply))
                let report = RecoveryReport(result)
                return Set(report.repairs.compactMap { scenario.customer(forTransactionId: $0.originalTransactionId)?.index }).sorted()
            }
        }
    }

    /// A run as the commands run one, wired to the simulator and this ledger.
    package func reconciliation(_ store: LedgerStore, _ url: DatabaseURL, client: AppStoreServerAPIClient) throws -> ReconciliationRun {
        ReconciliationRun(client: client, verifier: try verifier(), store: store, databaseURL: url, logger: logger)
    }

    /// Pass 1 alone, as `run --skip-repair` runs it.
    package func recovery(_ baseURL: String, _ store: LedgerStore, _ url: DatabaseURL) throws -> PassOneRun {
        PassOneRun(reconciliation: try reconciliation(store, url, client: try client(baseURL)))
    }

    package struct PassOneRun: Sendable {
        package let reconciliation: ReconciliationRun

        package func run(_ options: NotificationRecovery.Options) async throws -> RecoveryReport {
            RecoveryReport(
                try await reconciliation.execute(
                    .init(
                        kind: .run, window: .fixed(start: options.window.start, end: options.window.end), mode: options.dryRun ? .dryRun : .apply,
                        onlyFailures: options.onlyFailures, repair: false, onlyTypes: options.onlyTypes
                    )
                )
            )
        }
    }

    /// Every row of the ledger's tables, as text, ordered, without the times of recording: two
    /// ledgers with the same content dump the same.
    /// - Parameter worldNow: the simulated world's present. A transaction signed after it was
    ///   signed by Get Transaction History at the time of a request (a restore, which no
    ///   notification announces, reaches the ledger only so): its signing time is that of the
    ///   request, not content, and dumps as `at-request`.
    package static func dump(_ client: PostgresClient, worldNow: Date = .distantFuture) async throws -> [String] {
        var lines: [String] = []
        let queries: [PostgresQuery] = [
            "SELECT notification_uuid::text || '|' || notification_type || '|' || coalesce(subtype, '') || '|' || signed_date::text || '|' || source FROM app_store.notifications ORDER BY 1",
            """
            SELECT transaction_id || '|' || CASE WHEN signed_date > \(worldNow) THEN 'at-request' ELSE signed_date::text END || '|'
                || coalesce(revocation_date::text, '') || '|' || coalesce(expires_date::text, '') FROM app_store.transactions ORDER BY 1
            """,
            // A subscription pass 2 repaired holds the signing of Apple's answer (signed at request time).
            """
            SELECT original_transaction_id || '|' || coalesce(status::text, '') || '|' || coalesce(expires_date::text, '') || '|' || coalesce(auto_renew_status::text, '') || '|'
                || CASE WHEN last_signed_date > \(worldNow) THEN 'at-request' ELSE last_signed_date::text END FROM app_store.subscriptions ORDER BY 1
            """,
            "SELECT environment || '|' || account_id || '|' || coalesce(revision, '') FROM app_store.accounts ORDER BY 1",
            "SELECT kind || '|' || outcome FROM app_store.runs ORDER BY started_at",
            "SELECT reason || '|' || coalesce(notification_uuid, '') FROM app_store.rejected_payloads ORDER BY 1",
        ]
        for (index, query) in queries.enumerated() {
            for try await line in try await client.query(query).decode(String.self) { lines.append("\(index):\(line)") }
        }
        return lines
    }

    package static func historyUUIDs(_ client: PostgresClient) async throws -> Set<String> {
        var found: Set<String> = []
        for try await uuid in try await client.query("SELECT notification_uuid::text FROM app_store.notifications WHERE source = 'history'").decode(String.self) {
            found.insert(uuid)
        }
        return found
    }
}

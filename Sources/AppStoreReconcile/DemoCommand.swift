import AppStoreSimulator
import ArgumentParser
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData
import ThrowawayPostgres

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show the tool at work on embedded defaults: a throwaway PostgreSQL and a test PKI.",
        discussion: """
            Needs nothing configured. Starts a private PostgreSQL cluster from the installed server binaries \
            (deleted again at the end), creates the ledger schema, prints the ledger's state, and verifies \
            payloads signed by a freshly minted test PKI: one genuine, one tampered. DATABASE_URL is ignored \
            so that the demo never touches a real ledger; pass --database-url to use a server of your own.
            """
    )

    @Option(name: .customLong("database-url"), help: "Use this PostgreSQL server instead of a throwaway cluster.")
    var databaseURL: String?

    func run() async throws {
        try await withExitStatus {
            let logger = Logger(label: "appstore-reconcile.demo")
            var cluster: ThrowawayPostgres?
            defer { cluster?.stop() }
            let url: DatabaseURL
            if let databaseURL {
                url = try Settings(flags: [.databaseURL: databaseURL], environment: [:]).databaseURL()
                print("Using the database at \(url).")
            } else {
                print("Starting a throwaway PostgreSQL cluster…")
                let started = try ThrowawayPostgres.start(logger: logger)
                cluster = started
                url = try DatabaseURL(started.url())
                print("  running in \(started.directory) (removed when the demo ends)")
            }

            let summary = try await LedgerDatabase.withClient(url, logger: logger) { client in
                let outcome = try await Migrator().migrate(client, logger: logger)
                print("Migrated the ledger: \(outcome.applied.isEmpty ? "already up to date" : outcome.applied.joined(separator: ", ")).")
                return try await LedgerSummary.read(client, logger: logger)
            }
            print("""

                Ledger (schema app_store):
                  notifications from the webhook   \(summary.notificationsFromWebhook)
                  notifications recovered          \(summary.notificationsFromHistory)
                  transactions                     \(summary.transactions)
                  subscriptions (active)           \(summary.subscriptions) (\(summary.activeSubscriptions))
                  stored revisions                 \(summary.historyRevisions)
                  runs                             \(summary.runs)
                  rejected payloads                \(summary.rejectedPayloads)
                """)

            try await demonstrateVerification()
        }
    }

    /// Signs a notification with a test PKI and shows a genuine and a tampered copy verified.
    private func demonstrateVerification() async throws {
        let pki = try TestPKI()
        let signer = try pki.signer()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var transaction = TransactionPayload(transactionId: "2000000000000001", originalTransactionId: "2000000000000001")
        transaction.bundleId = "com.example.demo"
        transaction.productId = "com.example.demo.monthly"
        transaction.type = .autoRenewable
        transaction.purchaseDate = now
        transaction.expiresDate = now + 30 * 86_400_000
        transaction.environment = .sandbox
        transaction.signedDate = now
        var renewal = RenewalInfoPayload(originalTransactionId: "2000000000000001")
        renewal.autoRenewStatus = 1
        renewal.autoRenewProductId = "com.example.demo.monthly"
        renewal.environment = .sandbox
        renewal.signedDate = now
        let notification = NotificationPayload(
            notificationType: .subscribed, subtype: .initialBuy, notificationUUID: UUID().uuidString.lowercased(),
            signedDate: now,
            data: NotificationData(
                bundleId: "com.example.demo", environment: .sandbox,
                signedTransactionInfo: try signer.sign(transaction), signedRenewalInfo: try signer.sign(renewal),
                status: .active
            )
        )
        let genuine = try signer.sign(notification)
        var tamperedParts = genuine.split(separator: ".").map(String.init)
        var payloadJSON = Base64URL.decode(Substring(tamperedParts[1]))!
        let original = Array("INITIAL_BUY".utf8)
        if let range = payloadJSON.firstRange(of: original) {
            payloadJSON.replaceSubrange(range, with: Array("RESUBSCRIBE".utf8))
        }
        tamperedParts[1] = Base64URL.encode(payloadJSON)
        let tampered = tamperedParts.joined(separator: ".")

        let verifier = try SignedDataVerifier(
            VerifierConfiguration(rootCertificates: [pki.root], bundleId: "com.example.demo", appAppleId: nil, environment: .sandbox)
        )
        print("\nVerifying payloads signed by a test PKI minted just now:")
        for (label, jws) in [("genuine SUBSCRIBED/INITIAL_BUY", genuine), ("same payload, subtype altered", tampered)] {
            let inspection = await PayloadInspection.inspect(jws, kind: .notification, verifier: verifier)
            print("  \(label): \(inspection.summaryLine)")
        }
    }
}

import AppStoreSimulator
import Crypto
import Foundation
import SignedData

/// Verification against its physical ceiling, and the payloads every verifier is measured on.
struct VerificationFigures {
    static let bundleId = "com.example.benchmark"
    static let appAppleId: Int64 = 1_234_567_890

    let pki: TestPKI
    /// Distinct notifications, each with a signed transaction and a signed renewal info.
    let notifications: [String]

    init(count: Int = 500) throws {
        let reference = Date()
        pki = try TestPKI(TestPKI.Options(referenceTime: reference))
        let signer = try pki.signer()
        notifications = try (0..<count).map { try Self.notification(index: $0, reference: reference, bundleId: Self.bundleId, signer: signer) }
    }

    /// A notification of another app (`bundleId`) signed by this PKI: what any developer can
    /// obtain of their own app and post to someone else's receiver.
    func notification(of bundleId: String) throws -> String {
        try Self.notification(index: 0, reference: Date(), bundleId: bundleId, signer: try pki.signer())
    }

    /// A DID_RENEW of `bundleId`, signed `index` minutes before `reference`, with its transaction
    /// and renewal info.
    static func notification(index: Int, reference: Date, bundleId: String, signer: JWSSigner) throws -> String {
        let signedDate = Int64(reference.timeIntervalSince1970 * 1000) - Int64(index) * 60_000
        var transaction = TransactionPayload(transactionId: "\(2_000_000_000_000_000 + index)", originalTransactionId: "\(1_000_000_000_000_000 + index)")
        transaction.bundleId = bundleId
        transaction.productId = "com.example.benchmark.monthly"
        transaction.type = .autoRenewable
        transaction.purchaseDate = signedDate
        transaction.expiresDate = signedDate + 2_592_000_000
        transaction.environment = .production
        transaction.signedDate = signedDate
        transaction.price = 4990
        transaction.currency = "USD"
        transaction.inAppOwnershipType = "PURCHASED"
        transaction.transactionReason = "RENEWAL"
        transaction.storefront = "USA"
        transaction.storefrontId = "143441"
        var renewal = RenewalInfoPayload(originalTransactionId: transaction.originalTransactionId)
        renewal.autoRenewStatus = 1
        renewal.autoRenewProductId = transaction.productId
        renewal.productId = transaction.productId
        renewal.environment = .production
        renewal.signedDate = signedDate
        renewal.recentSubscriptionStartDate = signedDate
        renewal.renewalDate = signedDate + 2_592_000_000
        let notification = NotificationPayload(
            notificationType: .didRenew, notificationUUID: UUID().uuidString.lowercased(), signedDate: signedDate,
            data: NotificationData(
                appAppleId: Self.appAppleId, bundleId: bundleId, bundleVersion: "1", environment: .production,
                signedTransactionInfo: try signer.sign(transaction), signedRenewalInfo: try signer.sign(renewal), status: .active
            )
        )
        return try signer.sign(notification)
    }

    /// swift-crypto P-256 verifications per CPU-second: one key, one signature over a JWS-sized
    /// message, hashing included.
    static func ceiling(seconds: Double) async -> Rate {
        let key = P256.Signing.PrivateKey()
        let message = Array(repeating: UInt8(ascii: "a"), count: 600)
        let signature = try! key.signature(for: message)
        let publicKey = key.publicKey
        return await Task.detached {
            var accepted = 0
            let rate = await measure(seconds: seconds, batch: 1000) {
                for _ in 0..<1000 where publicKey.isValidSignature(signature, for: message) { accepted += 1 }
            }
            precondition(accepted > 0)
            return rate
        }.value
    }

    /// Full verifications (three signatures, chain cached, JSON decoded, identity checked) per
    /// CPU-second on one core, off the main actor as the reconciler calls it.
    func full(seconds: Double) async throws -> Rate {
        let verifier = try SignedDataVerifier(
            VerifierConfiguration(rootCertificates: [pki.root], bundleId: Self.bundleId, appAppleId: Self.appAppleId, environment: .production)
        )
        let payloads = notifications
        return await Task.detached {
            var verified = 0
            let rate = await measure(seconds: seconds, batch: payloads.count) {
                for jws in payloads where await verifier.verifyNotification(jws).verifiedPayload != nil { verified += 1 }
            }
            precondition(verified > 0, "the benchmark's notifications must verify")
            return rate
        }.value
    }
}

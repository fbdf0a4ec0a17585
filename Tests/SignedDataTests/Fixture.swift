import AppStoreSimulator
import Foundation
import SignedData

/// A test PKI around a fixed reference time and builders for the payloads Apple signs, so every
/// expiry case is deterministic.
struct Fixture {
    static let reference = Date(timeIntervalSince1970: 1_780_000_000)  // 2026-05-28
    static let day: TimeInterval = 86_400
    static let bundleId = "com.example.reconcile"
    static let appAppleId: Int64 = 1_234_567_890

    let pki: TestPKI
    let signer: JWSSigner

    init(_ configure: (inout TestPKI.Options) -> Void = { _ in }) throws {
        var options = TestPKI.Options(referenceTime: Self.reference)
        configure(&options)
        pki = try TestPKI(options)
        signer = try pki.signer()
    }

    /// Milliseconds of a time `days` before the reference time.
    static func millis(daysBefore days: Double) -> Int64 {
        Int64((reference.timeIntervalSince1970 - days * day) * 1000)
    }

    static let signedDate = millis(daysBefore: 1)

    func verifier(
        environment: AppStoreEnvironment = .production, roots: [X509Certificate]? = nil,
        appAppleId: Int64? = Fixture.appAppleId, online: OnlineChecks? = nil, maximumPayloadBytes: Int = 256 * 1024
    ) throws -> SignedDataVerifier {
        try SignedDataVerifier(
            VerifierConfiguration(
                rootCertificates: roots ?? [pki.root], bundleId: Self.bundleId, appAppleId: appAppleId,
                environment: environment, maximumPayloadBytes: maximumPayloadBytes, onlineChecks: online
            )
        )
    }

    static func transaction(
        environment: AppStoreEnvironment = .production, bundleId: String = Fixture.bundleId, signedDate: Int64 = Fixture.signedDate
    ) -> TransactionPayload {
        var transaction = TransactionPayload(transactionId: "2000000123456789", originalTransactionId: "2000000123450000")
        transaction.bundleId = bundleId
        transaction.productId = "com.example.reconcile.monthly"
        transaction.subscriptionGroupIdentifier = "21000001"
        transaction.purchaseDate = signedDate - 60_000
        transaction.originalPurchaseDate = signedDate - 90 * 86_400_000
        transaction.expiresDate = signedDate + 30 * 86_400_000
        transaction.type = .autoRenewable
        transaction.inAppOwnershipType = "PURCHASED"
        transaction.transactionReason = "RENEWAL"
        transaction.environment = environment
        transaction.signedDate = signedDate
        transaction.price = 4990
        transaction.currency = "USD"
        return transaction
    }

    static func renewalInfo(environment: AppStoreEnvironment = .production, signedDate: Int64 = Fixture.signedDate) -> RenewalInfoPayload {
        var renewal = RenewalInfoPayload(originalTransactionId: "2000000123450000")
        renewal.productId = "com.example.reconcile.monthly"
        renewal.autoRenewProductId = "com.example.reconcile.monthly"
        renewal.autoRenewStatus = 1
        renewal.environment = environment
        renewal.signedDate = signedDate
        renewal.renewalDate = signedDate + 30 * 86_400_000
        return renewal
    }

    /// A DID_RENEW notification with its signed transaction and renewal info.
    func notification(
        environment: AppStoreEnvironment = .production, appAppleId: Int64? = Fixture.appAppleId,
        bundleId: String = Fixture.bundleId, signedDate: Int64 = Fixture.signedDate,
        transaction: TransactionPayload? = nil, renewalInfo: RenewalInfoPayload? = nil
    ) throws -> NotificationPayload {
        NotificationPayload(
            notificationType: .didRenew, notificationUUID: "0c6c4f5e-6d3a-4a8b-9a1e-2f5b8f7d3c21",
            signedDate: signedDate,
            data: NotificationData(
                appAppleId: appAppleId, bundleId: bundleId, bundleVersion: "42", environment: environment,
                signedTransactionInfo: try signer.sign(transaction ?? Self.transaction(environment: environment, signedDate: signedDate)),
                signedRenewalInfo: try signer.sign(renewalInfo ?? Self.renewalInfo(environment: environment, signedDate: signedDate)),
                status: .active
            )
        )
    }

    func signedNotification(
        environment: AppStoreEnvironment = .production, appAppleId: Int64? = Fixture.appAppleId, signedDate: Int64 = Fixture.signedDate
    ) throws -> String {
        try signer.sign(notification(environment: environment, appAppleId: appAppleId, signedDate: signedDate))
    }

    /// A signer whose header carries other certificates or claims another algorithm.
    func signer(x5c: [String]? = nil, algorithm: String = "ES256") throws -> JWSSigner {
        try JWSSigner(
            key: pki.leafKey,
            x5c: x5c ?? [TestPKI.x5cEntry(pki.leaf), TestPKI.x5cEntry(pki.intermediate), TestPKI.x5cEntry(pki.root)],
            algorithm: algorithm
        )
    }
}

extension VerificationOutcome {
    var reason: RejectionReason? { rejection?.reason }
    var isVerified: Bool { verifiedPayload != nil }
}

/// Replaces one part (0 header, 1 payload, 2 signature) of a compact JWS.
func replacingPart(_ index: Int, of jws: String, with part: String) -> String {
    var parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    parts[index] = part
    return parts.joined(separator: ".")
}

func part(_ index: Int, of jws: String) -> String {
    String(jws.split(separator: ".", omittingEmptySubsequences: false)[index])
}

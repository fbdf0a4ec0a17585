import AppStoreSimulator
import Foundation
import Reports
import Reconciliation
import SignedData

/// The demo's last step: a notification signed by a test PKI minted on the spot, verified as it
/// came and with one byte of its payload altered, to show what the verifier refuses.
enum VerificationDemo {
    /// Signs a notification with a test PKI and shows a genuine and a tampered copy verified.
    static func show() async throws {
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

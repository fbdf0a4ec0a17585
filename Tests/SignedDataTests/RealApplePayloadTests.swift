import AppStoreServerAPI
import Crypto
import Foundation
import SignedData
import Testing

/// A transaction Apple signed in the sandbox (public test data of another project: a consumable
/// purchase of 2025-02-10, leaf certificate valid 2023-09-12 to 2025-10-11). It shows that the
/// verifier accepts Apple's real chain, not only the chains our test PKI mints.
@Suite("A payload signed by Apple itself")
struct RealApplePayloadTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("ApplePayloads")

    /// SHA-256 of Apple Root CA - G3 as published on Apple's certificate authority page.
    static let appleRootG3Fingerprint = "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179"

    static func load() throws -> (jws: String, root: X509Certificate) {
        let jws = try String(contentsOf: directory.appendingPathComponent("sandbox-consumable-transaction.jws"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        // The operator's configured root: Apple's G3, identified by its published fingerprint.
        // (It happens to be the third x5c entry; the verifier itself never trusts that entry.)
        let header = try #require(Base64URL.decode(Substring(jws.split(separator: ".")[0])))
        let object = try JSONDecoder().decode([String: JSONValue].self, from: Data(header))
        guard case .array(let chain)? = object["x5c"], case .string(let rootText)? = chain.last else {
            throw RealPayloadError()
        }
        let der = try #require(Data(base64Encoded: rootText))
        let fingerprint = SHA256.hash(data: der).map { String(format: "%02x", $0) }.joined()
        try #require(fingerprint == appleRootG3Fingerprint)
        return (jws, try RootCertificateLoader.certificate(from: Array(der), source: "Apple Root CA - G3"))
    }

    struct RealPayloadError: Error {}

    @Test func appleSignedSandboxTransactionVerifiesAgainstAppleRootG3() async throws {
        let (jws, root) = try Self.load()
        let verifier = try SignedDataVerifier(
            VerifierConfiguration(rootCertificates: [root], bundleId: "com.goodheartapp", appAppleId: nil, environment: .sandbox)
        )
        let transaction = try #require(await verifier.verifyTransaction(jws).verifiedPayload)
        #expect(transaction.transactionId == "2000000847061981")
        #expect(transaction.type == .consumable)
        #expect(transaction.signedDate == 1_739_161_772_561)
        #expect(transaction.price == 230_000)
        #expect(transaction.currency == "JPY")
    }

    @Test func appleSignedTransactionFailsOnlineBecauseItsLeafHasSinceExpired() async throws {
        let (jws, root) = try Self.load()
        let verifier = try SignedDataVerifier(
            VerifierConfiguration(
                rootCertificates: [root], bundleId: "com.goodheartapp", appAppleId: nil, environment: .sandbox,
                // A fixed present, after the leaf's expiry, not the wall clock.
                onlineChecks: OnlineChecks(transport: HTTPOCSPTransport(timeout: .seconds(2)), now: { Date(timeIntervalSince1970: 1_795_392_000) })
            )
        )
        #expect(await verifier.verifyTransaction(jws).rejection?.reason == .certificateNotValidAtTime)
    }

    @Test func appleSignedTransactionIsRejectedForAnotherBundleOrEnvironment() async throws {
        let (jws, root) = try Self.load()
        let otherBundle = try SignedDataVerifier(
            VerifierConfiguration(rootCertificates: [root], bundleId: "com.example.other", appAppleId: nil, environment: .sandbox)
        )
        let production = try SignedDataVerifier(
            VerifierConfiguration(rootCertificates: [root], bundleId: "com.goodheartapp", appAppleId: 1, environment: .production)
        )
        #expect(await otherBundle.verifyTransaction(jws).rejection?.reason == .wrongBundle)
        #expect(await production.verifyTransaction(jws).rejection?.reason == .wrongEnvironment)
    }
}

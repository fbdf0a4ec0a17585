import AppStoreSimulator
import Foundation
import SignedData
import Testing

@Suite("Every rejection reason of the verifier")
struct RejectionTests {
    @Test func aTamperedPayloadByteIsABadSignature() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signedNotification()
        var payload = Base64URL.decode(Substring(part(1, of: jws)))!
        let index = try #require(payload.firstIndex(of: UInt8(ascii: "4")), "a digit to change in bundleVersion/ids")
        payload[index] = UInt8(ascii: "5")
        let tampered = replacingPart(1, of: jws, with: Base64URL.encode(payload))
        let outcome = try await fixture.verifier().verifyNotification(tampered)
        #expect(outcome.reason == .badSignature)
    }

    @Test func aTamperedSignatureIsABadSignature() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signedNotification()
        var signature = Base64URL.decode(Substring(part(2, of: jws)))!
        signature[10] ^= 0x01
        let outcome = try await fixture.verifier().verifyNotification(replacingPart(2, of: jws, with: Base64URL.encode(signature)))
        #expect(outcome.reason == .badSignature)
    }

    @Test func aSignatureOfTheWrongLengthIsABadSignature() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signedNotification()
        let outcome = try await fixture.verifier().verifyNotification(replacingPart(2, of: jws, with: Base64URL.encode([UInt8](repeating: 1, count: 70))))
        #expect(outcome.reason == .badSignature)
    }

    @Test func aChainUnderARootThatIsNotConfiguredIsUntrusted() async throws {
        let attacker = try Fixture()
        let operatorRoot = try Fixture().pki.root
        let outcome = try await attacker.verifier(roots: [operatorRoot]).verifyNotification(attacker.signedNotification())
        #expect(outcome.reason == .untrustedChain)
    }

    @Test func theRootCarriedInX5cIsNeverTrustedByItself() async throws {
        // The attacker puts the operator's real root in x5c[2]; the chain still leads to the attacker's root.
        let attacker = try Fixture()
        let genuine = try Fixture()
        let signer = try attacker.signer(x5c: [
            TestPKI.x5cEntry(attacker.pki.leaf), TestPKI.x5cEntry(attacker.pki.intermediate), TestPKI.x5cEntry(genuine.pki.root),
        ])
        let jws = try signer.sign(Fixture.transaction())
        let outcome = try await attacker.verifier(roots: [genuine.pki.root]).verifyTransaction(jws)
        #expect(outcome.reason == .untrustedChain)
    }

    @Test(arguments: [2, 4])
    func anX5cWithoutExactlyThreeCertificatesHasABadChainLength(count: Int) async throws {
        let fixture = try Fixture()
        let entries = [fixture.pki.leaf, fixture.pki.intermediate, fixture.pki.root, fixture.pki.root]
        let signer = try fixture.signer(x5c: try entries.prefix(count).map(TestPKI.x5cEntry))
        let outcome = try await fixture.verifier().verifyTransaction(signer.sign(Fixture.transaction()))
        #expect(outcome.reason == .badChainLength)
    }

    @Test(arguments: ["none", "HS256", "RS256", "ES384"])
    func anAlgorithmOtherThanES256IsUnsupported(algorithm: String) async throws {
        let fixture = try Fixture()
        let jws = try fixture.signer(algorithm: algorithm).sign(Fixture.transaction())
        let outcome = try await fixture.verifier().verifyTransaction(jws)
        #expect(outcome.reason == .unsupportedAlgorithm)
    }

    @Test func anAlgNoneTokenWithAnEmptySignatureIsRejected() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signer(algorithm: "none").sign(Fixture.transaction())
        let outcome = try await fixture.verifier().verifyTransaction(replacingPart(2, of: jws, with: ""))
        #expect(outcome.reason == .malformed)
    }

    @Test func aLeafWithoutAppleMarkerExtensionIsRejected() async throws {
        let fixture = try Fixture { $0.leafHasAppleMarker = false }
        let outcome = try await fixture.verifier().verifyTransaction(fixture.signer.sign(Fixture.transaction()))
        #expect(outcome.reason == .missingAppleOID)
        #expect(outcome.rejection?.detail.contains("1.2.840.113635.100.6.11.1") == true)
    }

    @Test func anIntermediateWithoutAppleMarkerExtensionIsRejected() async throws {
        let fixture = try Fixture { $0.intermediateHasAppleMarker = false }
        let outcome = try await fixture.verifier().verifyTransaction(fixture.signer.sign(Fixture.transaction()))
        #expect(outcome.reason == .missingAppleOID)
        #expect(outcome.rejection?.detail.contains("1.2.840.113635.100.6.2.1") == true)
    }

    @Test func anIntermediateThatIsNotACertificateAuthorityIsRejected() async throws {
        let fixture = try Fixture { $0.intermediateIsCertificateAuthority = false }
        let outcome = try await fixture.verifier().verifyTransaction(fixture.signer.sign(Fixture.transaction()))
        #expect(outcome.reason == .missingAppleOID)
    }

    @Test func aLeafExpiredAtSignedDateIsNotValidAtTheEffectiveTime() async throws {
        let reference = Fixture.reference
        let fixture = try Fixture {
            $0.leafValidity = (reference - 400 * Fixture.day)...(reference - 10 * Fixture.day)
        }
        let signedAfterExpiry = Fixture.millis(daysBefore: 5)
        let jws = try fixture.signer.sign(Fixture.transaction(signedDate: signedAfterExpiry))
        let outcome = try await fixture.verifier().verifyTransaction(jws)
        #expect(outcome.reason == .certificateNotValidAtTime)
    }

    @Test func aLeafNotYetValidAtSignedDateIsNotValidAtTheEffectiveTime() async throws {
        let reference = Fixture.reference
        let fixture = try Fixture { $0.leafValidity = (reference - 10 * Fixture.day)...(reference + 400 * Fixture.day) }
        let jws = try fixture.signer.sign(Fixture.transaction(signedDate: Fixture.millis(daysBefore: 20)))
        let outcome = try await fixture.verifier().verifyTransaction(jws)
        #expect(outcome.reason == .certificateNotValidAtTime)
    }

    @Test func aNotificationForAnotherBundleIsRejected() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signer.sign(fixture.notification(bundleId: "com.attacker.app"))
        let outcome = try await fixture.verifier().verifyNotification(jws)
        #expect(outcome.reason == .wrongBundle)
    }

    @Test func aTransactionForAnotherBundleIsRejected() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signer.sign(Fixture.transaction(bundleId: "com.attacker.app"))
        #expect(try await fixture.verifier().verifyTransaction(jws).reason == .wrongBundle)
    }

    @Test func aSandboxNotificationIsRejectedByAProductionVerifier() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signedNotification(environment: .sandbox, appAppleId: nil)
        let verifier = try fixture.verifier(environment: .production)
        // A production verifier compares appAppleId first; give the payload the right one to
        // isolate the environment check.
        let withApp = try fixture.signer.sign(fixture.notification(environment: .sandbox, appAppleId: Fixture.appAppleId))
        #expect(await verifier.verifyNotification(withApp).reason == .wrongEnvironment)
        #expect(await verifier.verifyNotification(jws).rejection != nil)
    }

    @Test func aTransactionOrRenewalInfoFromAnotherEnvironmentIsRejected() async throws {
        let fixture = try Fixture()
        let verifier = try fixture.verifier(environment: .production)
        let transaction = try fixture.signer.sign(Fixture.transaction(environment: .sandbox))
        let renewal = try fixture.signer.sign(Fixture.renewalInfo(environment: .sandbox))
        #expect(await verifier.verifyTransaction(transaction).reason == .wrongEnvironment)
        #expect(await verifier.verifyRenewalInfo(renewal).reason == .wrongEnvironment)
    }

    @Test func aProductionNotificationForAnotherAppIsRejected() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signedNotification(environment: .production, appAppleId: 999)
        #expect(try await fixture.verifier().verifyNotification(jws).reason == .wrongApp)
    }

    @Test func aNotificationWhoseNestedTransactionFailsIsRejectedAsNested() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signer.sign(fixture.notification(transaction: Fixture.transaction(bundleId: "com.other")))
        let outcome = try await fixture.verifier().verifyNotification(jws)
        #expect(outcome.reason == .nestedPayloadRejected)
        #expect(outcome.rejection?.detail.hasPrefix("signedTransactionInfo: wrong_bundle") == true)
    }

    @Test func aNotificationWhoseNestedRenewalInfoIsSignedByAnotherRootIsRejectedAsNested() async throws {
        let fixture = try Fixture()
        let stranger = try Fixture()
        var notification = try fixture.notification()
        notification.data?.signedRenewalInfo = try stranger.signer.sign(Fixture.renewalInfo())
        let outcome = try await fixture.verifier().verifyNotification(fixture.signer.sign(notification))
        #expect(outcome.reason == .nestedPayloadRejected)
        #expect(outcome.rejection?.detail.hasPrefix("signedRenewalInfo: untrusted_chain") == true)
    }

    @Test func base64urlInsteadOfStandardBase64InsideX5cIsMalformed() async throws {
        let fixture = try Fixture()
        let entries = try [fixture.pki.leaf, fixture.pki.intermediate, fixture.pki.root].map(TestPKI.x5cEntry)
        let urlSafe = entries.map {
            $0.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        #expect(urlSafe != entries, "the DER must contain + or / for this test to mean anything")
        let jws = try fixture.signer(x5c: urlSafe).sign(Fixture.transaction())
        let outcome = try await fixture.verifier().verifyTransaction(jws)
        #expect(outcome.reason == .malformed)
    }

    @Test func aPayloadThatIsNotJSONIsMalformed() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signer.sign(json: Array("{\"transactionId\": \"1\", oops".utf8))
        let outcome = try await fixture.verifier().verifyTransaction(jws)
        #expect(outcome.reason == .malformed)
    }

    @Test func aPayloadWithAFieldOfTheWrongTypeIsMalformed() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signer.sign(json: Array("{\"transactionId\": 12, \"signedDate\": \"yesterday\"}".utf8))
        #expect(try await fixture.verifier().verifyTransaction(jws).reason == .malformed)
    }

    @Test(arguments: ["", "abc", "a.b", "a.b.c.d", "eyJ.eyJ.", "!!!.###.$$$"])
    func textThatIsNotACompactJWSIsMalformed(text: String) async throws {
        let outcome = try await Fixture().verifier().verifyNotification(text)
        #expect(outcome.reason == .malformed)
    }

    @Test func anOversizedInputIsRejectedBeforeParsing() async throws {
        let fixture = try Fixture()
        let huge = String(repeating: "A", count: 300 * 1024) + "." + String(repeating: "B", count: 10) + ".C"
        let outcome = try await fixture.verifier().verifyNotification(huge)
        #expect(outcome.reason == .malformed)
        #expect(outcome.rejection?.detail.contains("over the limit") == true)
    }

    @Test func everyRejectionReasonHasAStableCodeAndAnExplanation() {
        let codes = RejectionReason.allCases.map(\.rawValue)
        #expect(codes == [
            "malformed", "unsupported_algorithm", "bad_chain_length", "untrusted_chain",
            "certificate_not_valid_at_time", "missing_apple_oid", "bad_signature", "wrong_bundle", "wrong_app",
            "wrong_environment", "nested_payload_rejected",
        ])
        #expect(RejectionReason.allCases.allSatisfy { !$0.explanation.isEmpty })
    }
}

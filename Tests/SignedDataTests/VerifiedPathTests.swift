import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import SignedData
import Synchronization
import Testing

@Suite("Payloads that verify, of every kind")
struct VerifiedPathTests {
    @Test func aProductionNotificationVerifiesWithItsNestedTransactionAndRenewalInfo() async throws {
        let fixture = try Fixture()
        let outcome = try await fixture.verifier().verifyNotification(fixture.signedNotification())
        let verified = try #require(outcome.verifiedPayload, "\(String(describing: outcome.rejection))")
        #expect(verified.payload.notificationType == .didRenew)
        #expect(verified.payload.subtype == nil)
        #expect(verified.payload.signedDate == Fixture.signedDate)
        #expect(verified.payload.data?.status == .active)
        #expect(verified.transaction == Fixture.transaction())
        #expect(verified.renewalInfo == Fixture.renewalInfo())
    }

    @Test func aSandboxNotificationWithoutAppAppleIdVerifies() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signedNotification(environment: .sandbox, appAppleId: nil)
        let outcome = try await fixture.verifier(environment: .sandbox, appAppleId: nil).verifyNotification(jws)
        #expect(outcome.isVerified)
    }

    @Test func aSandboxVerifierDoesNotCompareAppAppleId() async throws {
        let fixture = try Fixture()
        let jws = try fixture.signedNotification(environment: .sandbox, appAppleId: 777)
        #expect(try await fixture.verifier(environment: .sandbox).verifyNotification(jws).isVerified)
    }

    @Test func aTransactionAndARenewalInfoVerifyOnTheirOwn() async throws {
        let fixture = try Fixture()
        let verifier = try fixture.verifier()
        #expect(await verifier.verifyTransaction(try fixture.signer.sign(Fixture.transaction())).verifiedPayload == Fixture.transaction())
        #expect(await verifier.verifyRenewalInfo(try fixture.signer.sign(Fixture.renewalInfo())).verifiedPayload == Fixture.renewalInfo())
    }

    @Test func aRescindConsentNotificationVerifiesWithItsAppTransaction() async throws {
        let fixture = try Fixture()
        var appTransaction = AppTransactionPayload(bundleId: Fixture.bundleId)
        appTransaction.receiptType = .production
        appTransaction.appAppleId = Fixture.appAppleId
        appTransaction.receiptCreationDate = Fixture.signedDate
        appTransaction.applicationVersion = "7"
        let notification = NotificationPayload(
            notificationType: .rescindConsent, notificationUUID: "b7a1b9f2-3c4d-4e5f-8a9b-0c1d2e3f4a5b", signedDate: Fixture.signedDate,
            appData: AppData(
                appAppleId: Fixture.appAppleId, bundleId: Fixture.bundleId, environment: .production,
                signedAppTransactionInfo: try fixture.signer.sign(appTransaction)
            )
        )
        let outcome = try await fixture.verifier().verifyNotification(fixture.signer.sign(notification))
        #expect(outcome.verifiedPayload?.appTransaction == appTransaction)
    }

    @Test func anAppTransactionForAnotherAppIsRejectedInProduction() async throws {
        let fixture = try Fixture()
        var appTransaction = AppTransactionPayload(bundleId: Fixture.bundleId)
        appTransaction.receiptType = .production
        appTransaction.appAppleId = 1
        appTransaction.receiptCreationDate = Fixture.signedDate
        #expect(try await fixture.verifier().verifyAppTransaction(fixture.signer.sign(appTransaction)).reason == .wrongApp)
    }

    @Test func aRenewalExtensionSummaryNotificationTakesItsIdentityFromTheSummary() async throws {
        let fixture = try Fixture()
        let notification = NotificationPayload(
            notificationType: .renewalExtension, subtype: .summary, notificationUUID: "9d1f0b8e-1111-4222-8333-944455566677",
            signedDate: Fixture.signedDate,
            summary: RenewalExtensionSummary(
                environment: .production, appAppleId: Fixture.appAppleId, bundleId: Fixture.bundleId,
                productId: "com.example.reconcile.monthly", requestIdentifier: "req-1", storefrontCountryCodes: ["USA"],
                succeededCount: 10, failedCount: 0
            )
        )
        let outcome = try await fixture.verifier().verifyNotification(fixture.signer.sign(notification))
        #expect(outcome.verifiedPayload?.payload.summary?.succeededCount == 10)
    }

    @Test func anExternalPurchaseTokenNotificationInfersSandboxFromItsIdentifier() async throws {
        let fixture = try Fixture()
        let notification = NotificationPayload(
            notificationType: .externalPurchaseToken, subtype: .unreported, notificationUUID: "5a5a5a5a-0000-4000-8000-000000000001",
            signedDate: Fixture.signedDate,
            externalPurchaseToken: ExternalPurchaseToken(
                externalPurchaseId: "SANDBOX_b2158121-7af9-49d4-9561-1f588205523e", tokenCreationDate: Fixture.signedDate,
                appAppleId: Fixture.appAppleId, bundleId: Fixture.bundleId
            )
        )
        let jws = try fixture.signer.sign(notification)
        #expect(try await fixture.verifier(environment: .sandbox).verifyNotification(jws).isVerified)
        #expect(try await fixture.verifier(environment: .production).verifyNotification(jws).reason == .wrongEnvironment)
    }

    @Test func unknownTypesSubtypesAndFieldsDecodeAndKeepTheirRawValues() async throws {
        let fixture = try Fixture()
        let transaction = try fixture.signer.sign(Fixture.transaction())
        let json = """
            {"notificationType":"SOMETHING_NEW","subtype":"NEW_SUBTYPE","notificationUUID":"6f0e3d7a-2b1c-4d5e-9f8a-7b6c5d4e3f2a",
             "version":"2.0","signedDate":\(Fixture.signedDate),"aFieldFromTheFuture":{"x":[1,2,3]},
             "data":{"appAppleId":\(Fixture.appAppleId),"bundleId":"\(Fixture.bundleId)","environment":"Production",
                     "signedTransactionInfo":"\(transaction)","status":9}}
            """
        let outcome = try await fixture.verifier().verifyNotification(fixture.signer.sign(json: Array(json.utf8)))
        let verified = try #require(outcome.verifiedPayload)
        #expect(verified.payload.notificationType.rawValue == "SOMETHING_NEW")
        #expect(verified.payload.subtype?.rawValue == "NEW_SUBTYPE")
        #expect(verified.payload.data?.status?.rawValue == 9)
        #expect(!NotificationType.documented.contains(verified.payload.notificationType))
    }

    @Test func aShapeWithoutDataIsAttributedByThePartThatNamesTheApp() async throws {
        let fixture = try Fixture()
        func signed(_ part: String, _ body: String) throws -> String {
            let json = """
                {"notificationType":"UNCLAIM_SEATS","notificationUUID":"3b2a1c0d-9e8f-4a7b-8c6d-5e4f3a2b1c0d","version":"2.0",
                 "signedDate":\(Fixture.signedDate),"\(part)":\(body)}
                """
            return try fixture.signer.sign(json: Array(json.utf8))
        }
        let identity = #""appAppleId":\#(Fixture.appAppleId),"bundleId":"\#(Fixture.bundleId)","environment":"Production""#
        let unclaim = try signed("unclaimInfo", #"{\#(identity),"originalTransactionId":"2000000123","unclaimSeatIds":["8f7e6d5c-4b3a-4291-8807-1a2b3c4d5e6f"]}"#)
        let verified = try #require(await fixture.verifier().verifyNotification(unclaim).verifiedPayload)
        #expect(verified.payload.notificationType == .unclaimSeats)
        #expect(verified.otherPart?.name == "unclaimInfo")
        #expect(verified.identity == NotificationIdentity(bundleId: Fixture.bundleId, appAppleId: Fixture.appAppleId, environment: .production))
        #expect(verified.originalTransactionId == "2000000123")
        // Checked as the known parts are: another app, the other environment, another appAppleId.
        #expect(try await fixture.verifier().verifyNotification(signed("unclaimInfo", #"{"bundleId":"com.example.other","environment":"Production","appAppleId":\#(Fixture.appAppleId)}"#)).reason == .wrongBundle)
        #expect(try await fixture.verifier(environment: .sandbox, appAppleId: nil).verifyNotification(unclaim).reason == .wrongEnvironment)
        #expect(try await fixture.verifier().verifyNotification(signed("unclaimInfo", #"{"bundleId":"\#(Fixture.bundleId)","environment":"Production","appAppleId":7}"#)).reason == .wrongApp)
        // A part that names no app attributes nothing: still malformed.
        let nameless = try await fixture.verifier().verifyNotification(signed("seatInfo", #"{"seats":3,"environment":"Production"}"#))
        #expect(nameless.reason == .malformed)
    }

    @Test func aBogusThirdCertificateInX5cIsIgnoredAsApplesLibrariesDo() async throws {
        let fixture = try Fixture()
        let stranger = try Fixture()
        let signer = try fixture.signer(x5c: [
            TestPKI.x5cEntry(fixture.pki.leaf), TestPKI.x5cEntry(fixture.pki.intermediate), TestPKI.x5cEntry(stranger.pki.root),
        ])
        #expect(try await fixture.verifier().verifyTransaction(signer.sign(Fixture.transaction())).isVerified)
    }

    @Test func rootCertificatesLoadFromPEMAndDERFiles() throws {
        let fixture = try Fixture()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pem = directory.appendingPathComponent("root.pem")
        let der = directory.appendingPathComponent("root.cer")
        try fixture.pki.rootPEM().write(to: pem, atomically: true, encoding: .utf8)
        try Data(base64Encoded: TestPKI.x5cEntry(fixture.pki.root))!.write(to: der)
        let loaded = try RootCertificateLoader.load(paths: [pem.path, der.path])
        #expect(loaded == [fixture.pki.root, fixture.pki.root])
        let garbage = directory.appendingPathComponent("garbage.cer")
        try Data("not a certificate".utf8).write(to: garbage)
        #expect(throws: VerifierConfigurationError.self) { try RootCertificateLoader.load(paths: [garbage.path]) }
        #expect(throws: VerifierConfigurationError.self) { try RootCertificateLoader.load(paths: [directory.appendingPathComponent("missing").path]) }
    }

    @Test func aProductionVerifierRequiresTheAppAppleId() throws {
        let fixture = try Fixture()
        #expect(throws: VerifierConfigurationError.self) { try fixture.verifier(environment: .production, appAppleId: nil) }
        #expect(throws: VerifierConfigurationError.self) { try fixture.verifier(roots: []) }
    }
}

@Suite("Chain validation is cached without weakening the time check")
struct ChainCacheTests {
    @Test func aPayloadSignedAfterTheLeafExpiredIsRejectedEvenOnceTheChainIsCached() async throws {
        let reference = Fixture.reference
        let fixture = try Fixture { $0.leafValidity = (reference - 100 * Fixture.day)...(reference - 10 * Fixture.day) }
        let verifier = try fixture.verifier()
        let inside = try fixture.signer.sign(Fixture.transaction(signedDate: Fixture.millis(daysBefore: 50)))
        let after = try fixture.signer.sign(Fixture.transaction(signedDate: Fixture.millis(daysBefore: 5)))
        let before = try fixture.signer.sign(Fixture.transaction(signedDate: Fixture.millis(daysBefore: 150)))
        #expect(await verifier.verifyTransaction(inside).isVerified)
        #expect(await verifier.verifyTransaction(after).reason == .certificateNotValidAtTime)
        #expect(await verifier.verifyTransaction(before).reason == .certificateNotValidAtTime)
        #expect(await verifier.verifyTransaction(inside).isVerified)
    }

    @Test func aCachedChainStillChecksEverySignature() async throws {
        let fixture = try Fixture()
        let verifier = try fixture.verifier()
        let good = try fixture.signer.sign(Fixture.transaction())
        #expect(await verifier.verifyTransaction(good).isVerified)
        let forged = replacingPart(1, of: good, with: Base64URL.encode(Array("{\"bundleId\":\"\(Fixture.bundleId)\"}".utf8)))
        #expect(await verifier.verifyTransaction(forged).reason == .badSignature)
    }

    @Test func manyTasksVerifyingAtOnceAllGetTheRightAnswer() async throws {
        let fixture = try Fixture()
        let stranger = try Fixture()
        let verifier = try fixture.verifier()
        let good = try fixture.signedNotification()
        let bad = try stranger.signedNotification()
        let results = await withTaskGroup(of: (Bool, Bool).self) { group in
            for index in 0..<200 {
                group.addTask {
                    let expectGood = index % 3 != 0
                    let outcome = await verifier.verifyNotification(expectGood ? good : bad)
                    return (expectGood, outcome.isVerified)
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 200)
        #expect(results.allSatisfy { $0.0 == $0.1 })
    }
}

@Suite("Online checks: current time and OCSP")
struct OnlineCheckTests {
    @Test func aLeafValidAtSignedDateButExpiredNowPassesOfflineAndFailsOnline() async throws {
        let reference = Fixture.reference
        let fixture = try Fixture {
            $0.leafValidity = (reference - 400 * Fixture.day)...(reference - 10 * Fixture.day)
            $0.ocspResponderURL = "http://127.0.0.1:1/ocsp"
        }
        let jws = try fixture.signer.sign(Fixture.transaction(signedDate: Fixture.millis(daysBefore: 100)))
        #expect(try await fixture.verifier().verifyTransaction(jws).isVerified, "historical data is checked at signedDate")
        let online = OnlineChecks(transport: HTTPOCSPTransport(), now: { reference })
        #expect(try await fixture.verifier(online: online).verifyTransaction(jws).reason == .certificateNotValidAtTime)
    }

    /// Apple signs with a handful of chains: the good answer for one is kept (15 minutes at
    /// most), and concurrent payloads share the check in flight. Without the cache, 1,000
    /// notifications (three JWS each, two certificates per chain) would ask 6,000 times.
    @Test func aThousandNotificationsSignedByOneChainCostAtMostAHandfulOfOCSPRequests() async throws {
        let fixture = try Fixture { $0.ocspResponderURL = "http://ocsp.test/ocsp" }
        let responder = CountingOCSPTransport(TestOCSPResponder(pki: fixture.pki, now: { Fixture.reference }))
        let verifier = try fixture.verifier(online: OnlineChecks(transport: responder, now: { Fixture.reference }))
        let notifications = try (0..<1_000).map { index in
            var notification = try fixture.notification(signedDate: Fixture.signedDate + Int64(index))
            notification.notificationUUID = UUID().uuidString.lowercased()
            return try fixture.signer.sign(notification)
        }
        let verified = await withTaskGroup(of: Bool.self) { group in
            for jws in notifications { group.addTask { await verifier.verifyNotification(jws).isVerified } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(verified == 1_000)
        #expect(responder.requests == 2, "one check of the chain: the leaf and the intermediate")
    }

    /// A good answer holds 15 minutes, and never past the leaf's expiry; an unreachable
    /// responder or a revoked certificate is never kept, so the next payload asks again.
    @Test func aGoodAnswerIsKeptFifteenMinutesAndAFailureIsNeverKept() async throws {
        let clock = Mutex(Fixture.reference)
        let fixture = try Fixture {
            $0.ocspResponderURL = "http://ocsp.test/ocsp"
            $0.leafValidity = (Fixture.reference - 100 * Fixture.day)...(Fixture.reference + 40 * 60)
        }
        var answers = TestOCSPResponder(pki: fixture.pki, now: { clock.withLock { $0 } })
        let responder = CountingOCSPTransport(answers, failingFirst: 1)
        let verifier = try fixture.verifier(online: OnlineChecks(transport: responder, now: { clock.withLock { $0 } }))
        let jws = try fixture.signer.sign(Fixture.transaction())
        func advance(minutes: Double) { clock.withLock { $0 += minutes * 60 } }

        guard case .retryLater = await verifier.verifyTransaction(jws) else { Issue.record("an unreachable responder is retry later"); return }
        #expect(responder.requests == 1)
        #expect(await verifier.verifyTransaction(jws).isVerified, "the failure was not kept: asked again")
        #expect(responder.requests == 3)
        advance(minutes: 14)
        #expect(await verifier.verifyTransaction(jws).isVerified)
        #expect(responder.requests == 3, "kept for 15 minutes")
        advance(minutes: 2)
        #expect(await verifier.verifyTransaction(jws).isVerified)
        #expect(responder.requests == 5, "asked again after 15 minutes")
        // The leaf expires 40 minutes after the reference time: the answer got at 16 minutes is
        // kept until 31, the one got at 31.5 only until 40.
        advance(minutes: 15.5)
        #expect(await verifier.verifyTransaction(jws).isVerified)
        #expect(responder.requests == 7)
        advance(minutes: 5)
        #expect(await verifier.verifyTransaction(jws).isVerified)
        #expect(responder.requests == 7)
        advance(minutes: 5)
        #expect(await verifier.verifyTransaction(jws).reason == .certificateNotValidAtTime, "not past the leaf's expiry")
        #expect(responder.requests == 7)

        // Revoked: rejected, and asked again every time.
        let revokedFixture = try Fixture { $0.ocspResponderURL = "http://ocsp.test/ocsp" }
        answers = TestOCSPResponder(pki: revokedFixture.pki, now: { Fixture.reference })
        answers.revoked = [revokedFixture.pki.leaf]
        let revoking = CountingOCSPTransport(answers)
        let strict = try revokedFixture.verifier(online: OnlineChecks(transport: revoking, now: { Fixture.reference }))
        let revokedJWS = try revokedFixture.signer.sign(Fixture.transaction())
        var asked: [Int] = []
        for _ in 0..<3 {
            let outcome = await strict.verifyTransaction(revokedJWS)
            #expect(outcome.reason == .certificateNotValidAtTime && outcome.rejection?.detail.contains("revoked") == true, "\(outcome)")
            asked.append(revoking.requests)
        }
        #expect(zip(asked, asked.dropFirst()).allSatisfy { $0 < $1 }, "asked again each time: \(asked)")
    }

    /// An OCSP answer holds until its `nextUpdate`: one that holds 5 minutes is kept 5 minutes,
    /// not 15.
    @Test func aGoodAnswerIsKeptNoLongerThanItsNextUpdate() async throws {
        let clock = Mutex(Fixture.reference)
        let fixture = try Fixture { $0.ocspResponderURL = "http://ocsp.test/ocsp" }
        var answers = TestOCSPResponder(pki: fixture.pki, now: { clock.withLock { $0 } })
        answers.answersHold = 5 * 60
        let responder = CountingOCSPTransport(answers)
        let verifier = try fixture.verifier(online: OnlineChecks(transport: responder, now: { clock.withLock { $0 } }))
        let jws = try fixture.signer.sign(Fixture.transaction())
        #expect(await verifier.verifyTransaction(jws).isVerified)
        #expect(responder.requests == 2)
        clock.withLock { $0 += 4 * 60 }
        #expect(await verifier.verifyTransaction(jws).isVerified)
        #expect(responder.requests == 2, "kept while the answer holds")
        clock.withLock { $0 += 2 * 60 }
        #expect(await verifier.verifyTransaction(jws).isVerified)
        #expect(responder.requests == 4, "asked again once it no longer holds")
    }

    @Test func anUnreachableOCSPResponderMeansRetryLaterNotRejected() async throws {
        // Port 1 on loopback: nothing listens, the connection is refused.
        let fixture = try Fixture { $0.ocspResponderURL = "http://127.0.0.1:1/ocsp" }
        let online = OnlineChecks(transport: HTTPOCSPTransport(timeout: .seconds(3)), now: { Fixture.reference })
        let outcome = try await fixture.verifier(online: online).verifyTransaction(fixture.signer.sign(Fixture.transaction()))
        guard case .retryLater(let reason) = outcome else {
            Issue.record("expected retry later, got \(outcome)")
            return
        }
        #expect(reason.contains("OCSP"))
    }
}

/// Answers OCSP requests in process with the test responder and counts them; the first
/// `failingFirst` requests fail as an unreachable responder would.
final class CountingOCSPTransport: OCSPTransport {
    private let responder: TestOCSPResponder
    private let state: Mutex<(requests: Int, failing: Int)>

    init(_ responder: TestOCSPResponder, failingFirst: Int = 0) {
        self.responder = responder
        self.state = Mutex((0, failingFirst))
    }

    var requests: Int { state.withLock { $0.requests } }

    struct Unreachable: Error, CustomStringConvertible {
        var description: String { "connection refused" }
    }

    func send(request: [UInt8], to uri: String) async throws -> [UInt8] {
        let fail = state.withLock { state in
            state.requests += 1
            defer { state.failing -= 1 }
            return state.failing > 0
        }
        if fail { throw Unreachable() }
        return try responder.respond(to: request)
    }
}

import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import SignedData
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

import Crypto
import Foundation
import Synchronization
@_spi(FixedExpiryValidationTime) import X509

/// Verifies Apple's signed payloads (compact JWS, ES256, x5c chain) the way Apple specifies:
/// chain leaf → intermediate → a configured root, Apple's marker extensions, RFC 5280 validity
/// at the payload's `signedDate` (or now, with OCSP, when online checks are on), the ES256
/// signature, and then the payload's app and environment.
///
/// Results are values (`VerificationOutcome`), never throws. Safe to share between any number
/// of tasks: each distinct chain is validated once and its validity interval remembered, so
/// the per-payload cost is the signature check and JSON decoding. With online checks, a chain's
/// good OCSP answers are kept up to 15 minutes (`OnlineCheckCache`).
public final class SignedDataVerifier: Sendable {
    public let configuration: VerifierConfiguration
    private let roots: CertificateStore
    private let cache = ChainCache()
    private let onlineChecks = OnlineCheckCache()

    public init(_ configuration: VerifierConfiguration) throws {
        guard !configuration.rootCertificates.isEmpty else {
            throw VerifierConfigurationError(description: "no root certificate is configured")
        }
        guard configuration.environment == .production || configuration.environment == .sandbox else {
            throw VerifierConfigurationError(description: "the environment must be Production or Sandbox")
        }
        if configuration.environment == .production && configuration.appAppleId == nil {
            throw VerifierConfigurationError(description: "the app's appAppleId is required in Production")
        }
        self.configuration = configuration
        self.roots = CertificateStore(configuration.rootCertificates)
    }

    // MARK: - Payload kinds

    /// Verifies a notification's `signedPayload` and every signed payload nested in it.
    public func verifyNotification(_ signedPayload: String) async -> VerificationOutcome<VerifiedNotification> {
        let payload: NotificationPayload
        switch await verifySignedPayload(signedPayload, as: NotificationPayload.self, effectiveTime: \.signedDate) {
        case .verified(let verified): payload = verified
        case .rejected(let rejection): return .rejected(rejection)
        case .retryLater(let reason): return .retryLater(reason)
        }
        // A shape this release does not know is attributed by the part that names the app.
        let otherPart = payload.identity == nil ? Self.otherPart(of: signedPayload) : nil
        if let problem = checkIdentity(payload.identity ?? otherPart?.identity) { return .rejected(problem) }

        var verified = VerifiedNotification(payload: payload)
        verified.otherPart = otherPart
        if let data = payload.data {
            if let signed = data.signedTransactionInfo {
                switch await verifyTransaction(signed) {
                case .verified(let transaction): verified.transaction = transaction
                case .rejected(let rejection): return .rejected(nested("signedTransactionInfo", rejection))
                case .retryLater(let reason): return .retryLater("signedTransactionInfo: \(reason)")
                }
            }
            if let signed = data.signedRenewalInfo {
                switch await verifyRenewalInfo(signed) {
                case .verified(let renewalInfo): verified.renewalInfo = renewalInfo
                case .rejected(let rejection): return .rejected(nested("signedRenewalInfo", rejection))
                case .retryLater(let reason): return .retryLater("signedRenewalInfo: \(reason)")
                }
            }
        }
        if let signed = payload.appData?.signedAppTransactionInfo {
            switch await verifyAppTransaction(signed) {
            case .verified(let appTransaction): verified.appTransaction = appTransaction
            case .rejected(let rejection): return .rejected(nested("signedAppTransactionInfo", rejection))
            case .retryLater(let reason): return .retryLater("signedAppTransactionInfo: \(reason)")
            }
        }
        return .verified(verified)
    }

    /// Verifies a signed transaction (`signedTransactionInfo`, `signedTransactions[]`).
    public func verifyTransaction(_ signedTransaction: String) async -> VerificationOutcome<TransactionPayload> {
        await verifySignedPayload(signedTransaction, as: TransactionPayload.self, effectiveTime: \.signedDate).map {
            transaction in
            if transaction.bundleId != configuration.bundleId {
                return .rejected(wrongBundle(transaction.bundleId))
            }
            if transaction.environment != configuration.environment {
                return .rejected(wrongEnvironment(transaction.environment))
            }
            return .verified(transaction)
        }
    }

    /// Verifies a signed renewal info. It carries no bundle ID, so only its environment is checked.
    public func verifyRenewalInfo(_ signedRenewalInfo: String) async -> VerificationOutcome<RenewalInfoPayload> {
        await verifySignedPayload(signedRenewalInfo, as: RenewalInfoPayload.self, effectiveTime: \.signedDate).map {
            renewalInfo in
            renewalInfo.environment == configuration.environment
                ? .verified(renewalInfo) : .rejected(wrongEnvironment(renewalInfo.environment))
        }
    }

    /// Verifies a signed app transaction; its effective time is `receiptCreationDate`.
    public func verifyAppTransaction(_ signedAppTransaction: String) async -> VerificationOutcome<AppTransactionPayload> {
        await verifySignedPayload(
            signedAppTransaction, as: AppTransactionPayload.self, effectiveTime: \.receiptCreationDate
        ).map { appTransaction in
            if appTransaction.bundleId != configuration.bundleId {
                return .rejected(wrongBundle(appTransaction.bundleId))
            }
            if configuration.environment == .production && appTransaction.appAppleId != configuration.appAppleId {
                return .rejected(wrongApp(appTransaction.appAppleId))
            }
            if appTransaction.receiptType != configuration.environment {
                return .rejected(wrongEnvironment(appTransaction.receiptType))
            }
            return .verified(appTransaction)
        }
    }

    // MARK: - Identity

    /// Checks the app's identity, taken from `data`, else `summary`, else `externalPurchaseToken`,
    /// else `appData`, as Apple's verifier does, else from another part that names the app
    /// (`NotificationOtherPart`); `appAppleId` is compared in Production only.
    func checkIdentity(_ identity: NotificationIdentity?) -> Rejection? {
        guard let identity else {
            return Rejection(.malformed, "the notification names no app: none of data, summary, externalPurchaseToken and appData, and no other part with a bundleId")
        }
        let (bundleId, appAppleId, environment) = (identity.bundleId, identity.appAppleId, identity.environment)
        if bundleId != configuration.bundleId { return wrongBundle(bundleId) }
        if configuration.environment == .production && appAppleId != configuration.appAppleId {
            return wrongApp(appAppleId)
        }
        if environment != configuration.environment { return wrongEnvironment(environment) }
        return nil
    }

    /// The other part of an already verified payload, read again (rare: only a shape without
    /// any of the four known parts comes here).
    private static func otherPart(of signedPayload: String) -> NotificationOtherPart? {
        guard let jws = CompactJWS(signedPayload), let bytes = Base64URL.decode(jws.payload),
            let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(bytes))
        else { return nil }
        return NotificationOtherPart.find(in: object)
    }

    private func wrongBundle(_ found: String?) -> Rejection {
        Rejection(.wrongBundle, "bundleId is \(quoted(found)), expected \(quoted(configuration.bundleId))")
    }

    private func wrongApp(_ found: Int64?) -> Rejection {
        Rejection(.wrongApp, "appAppleId is \(found.map(String.init) ?? "absent"), expected \(configuration.appAppleId.map(String.init) ?? "absent")")
    }

    private func wrongEnvironment(_ found: AppStoreEnvironment?) -> Rejection {
        Rejection(.wrongEnvironment, "environment is \(quoted(found?.rawValue)), expected \(quoted(configuration.environment.rawValue))")
    }

    private func nested(_ field: String, _ rejection: Rejection) -> Rejection {
        Rejection(.nestedPayloadRejected, "\(field): \(rejection.reason.rawValue): \(rejection.detail)")
    }

    private func quoted(_ text: String?) -> String {
        guard let text else { return "absent" }
        return "\"\(text.prefix(100))\""
    }

    // MARK: - Signature and chain

    private func verifySignedPayload<Payload: Decodable & Sendable>(
        _ text: String, as type: Payload.Type, effectiveTime: (Payload) -> UnixMilliseconds?
    ) async -> VerificationOutcome<Payload> {
        let size = text.utf8.count
        guard size <= configuration.maximumPayloadBytes else {
            return .rejected(Rejection(.malformed, "the input is \(size) bytes, over the limit of \(configuration.maximumPayloadBytes)"))
        }
        guard let jws = CompactJWS(text) else {
            return .rejected(Rejection(.malformed, "not a compact JWS (three non-empty base64url parts separated by dots)"))
        }
        let entry = cache.entry(for: jws.header)
        let chain: AppleCertificateChain
        switch entry.chain {
        case .success(let parsed): chain = parsed
        case .failure(let rejection): return .rejected(rejection)
        }

        guard let signatureBytes = Base64URL.decode(jws.signature) else {
            return .rejected(Rejection(.malformed, "the signature part is not base64url"))
        }
        guard signatureBytes.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        else {
            return .rejected(Rejection(.badSignature, "the signature is \(signatureBytes.count) bytes, not a 64-byte ES256 (r‖s) signature"))
        }
        // Hashed in place: the signing input is most of a 20 KB notification.
        let digest = jws.signingInput.withContiguousStorageIfAvailable { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
            ?? SHA256.hash(data: Array(jws.signingInput))
        guard chain.leafKey.isValidSignature(signature, for: digest) else {
            return .rejected(Rejection(.badSignature, "the ES256 signature does not verify with the leaf certificate's key"))
        }

        guard let payloadBytes = Base64URL.decode(jws.payload) else {
            return .rejected(Rejection(.malformed, "the payload part is not base64url"))
        }
        let payload: Payload
        if let fast = (Payload.self as? any FastDecodable.Type)?.decodeFast(payloadBytes) as? Payload {
            payload = fast
        } else {
            // The fast path declines a repeated key; refused here, whichever value a decoder would keep.
            switch RepeatedJSONKey.scan(payloadBytes) {
            case .repeated(let key): return .rejected(Rejection(.malformed, "the payload gives the key \(RepeatedJSONKey.quoted(key)) more than once"))
            case .unreadable: return .rejected(Rejection(.malformed, "the payload is not JSON (or nests past 512 levels, or has a trailing comma)"))
            case .distinct: break
            }
            do {
                payload = try JSONDecoder().decode(Payload.self, from: Data(payloadBytes))
            } catch {
                if let key = RepeatedJSONKey.keyOfNumberOutOfRange(in: payloadBytes) {
                    return .rejected(Rejection(.malformed, "the payload's \(RepeatedJSONKey.quoted(key)) is a number no field of it holds"))
                }
                return .rejected(Rejection(.malformed, "the payload is not JSON of the expected shape (\(Self.describe(error)))"))
            }
        }

        // Before the chain is judged at the payload's own time: that time must be one.
        if let rejection = (payload as? any DatedPayload)?.dateOutOfRange { return .rejected(rejection) }

        if let online = configuration.onlineChecks {
            let now = online.now()
            let expiry = min(chain.leaf.notValidAfter, chain.intermediate.notValidAfter)
            let outcome = await onlineChecks.outcome(key: entry.header, now: now, expiry: expiry) {
                await validateOnline(chain, online, at: now)
            }
            switch outcome {
            case .verified: return .verified(payload)
            case .rejected(let rejection): return .rejected(rejection)
            case .retryLater(let reason): return .retryLater(reason)
            }
        }
        // Offline: at the payload's own signing time (Apple's verifier falls back to now when absent).
        let time = effectiveTime(payload).map { Date(timeIntervalSince1970: Double($0) / 1000) } ?? Date()
        if let interval = entry.trustedInterval, interval.contains(time) {
            return .verified(payload)
        }
        if let rejection = await validateOffline(entry, chain, at: time) { return .rejected(rejection) }
        return .verified(payload)
    }

    /// Full RFC 5280 validation at `time`; on success the chain's validity interval is cached.
    private func validateOffline(_ entry: ChainCache.Entry, _ chain: AppleCertificateChain, at time: Date) async -> Rejection? {
        guard let own = chain.ownValidity, own.contains(time) else {
            return Rejection(.certificateNotValidAtTime, notValidDetail(chain, at: time, what: "signed"))
        }
        var verifier = Verifier(rootCertificates: roots) {
            AppleMarkerExtensionsPolicy()
            RFC5280Policy(fixedExpiryValidationTime: time)
        }
        switch await verifier.validate(leaf: chain.leaf, intermediates: CertificateStore([chain.intermediate])) {
        case .validCertificate(let validated):
            if let rejection = checkShape(Array(validated), chain) { return rejection }
            let start = validated.map { $0.notValidBefore }.max()!
            let end = validated.map { $0.notValidAfter }.min()!
            cache.recordTrust(entry, interval: start...end)
            return nil
        case .couldNotValidate:
            if configuration.rootCertificates.contains(where: {
                $0.subject == chain.intermediate.issuer && !($0.notValidBefore...$0.notValidAfter).contains(time)
            }) {
                return Rejection(.certificateNotValidAtTime, "the configured root certificate was not valid at \(Self.format(time))")
            }
            return Rejection(.untrustedChain, "the leaf and intermediate do not chain to any of the \(configuration.rootCertificates.count) configured root certificates")
        }
    }

    /// Current-time validation, then the same again with OCSP for the leaf and the intermediate;
    /// with the time the OCSP answers hold until (their earliest `nextUpdate`). Its good answers
    /// are kept in `onlineChecks`.
    private func validateOnline(
        _ chain: AppleCertificateChain, _ online: OnlineChecks, at now: Date
    ) async -> (outcome: VerificationOutcome<Void>, holdsUntil: Date?) {
        guard let own = chain.ownValidity, own.contains(now) else {
            return (.rejected(Rejection(.certificateNotValidAtTime, notValidDetail(chain, at: now, what: "checked (online, current time)"))), nil)
        }
        var plain = Verifier(rootCertificates: roots) {
            AppleMarkerExtensionsPolicy()
            RFC5280Policy(fixedExpiryValidationTime: now)
        }
        switch await plain.validate(leaf: chain.leaf, intermediates: CertificateStore([chain.intermediate])) {
        case .validCertificate(let validated):
            if let rejection = checkShape(Array(validated), chain) { return (.rejected(rejection), nil) }
        case .couldNotValidate:
            return (.rejected(Rejection(.untrustedChain, "the leaf and intermediate do not chain to a configured root certificate valid now")), nil)
        }
        let requester = FailureRecordingRequester(online.transport)
        var revocation = Verifier(rootCertificates: roots) {
            AppleMarkerExtensionsPolicy()
            RFC5280Policy(fixedExpiryValidationTime: now)
            OCSPVerifierPolicy(failureMode: .hard, requester: requester, fixedExpiryValidationTime: now)
        }
        switch await revocation.validate(leaf: chain.leaf, intermediates: CertificateStore([chain.intermediate])) {
        case .validCertificate:
            return (.verified(()), requester.earliestNextUpdate)
        case .couldNotValidate(let failures):
            if let networkProblem = requester.firstFailure {
                return (.retryLater("the OCSP revocation check could not be completed: \(networkProblem)"), nil)
            }
            let reason = failures.first.map { String(describing: $0.policyFailureReason).prefix(200) } ?? "unknown"
            return (.rejected(Rejection(.certificateNotValidAtTime, "the OCSP revocation check failed: \(reason)")), nil)
        }
    }

    /// The path found must be exactly leaf → the intermediate from x5c → a configured root.
    private func checkShape(_ validated: [Certificate], _ chain: AppleCertificateChain) -> Rejection? {
        guard validated.count == 3, validated[1] == chain.intermediate else {
            return Rejection(.untrustedChain, "the leaf is not issued by the intermediate in x5c under a configured root")
        }
        return nil
    }

    private func notValidDetail(_ chain: AppleCertificateChain, at time: Date, what: String) -> String {
        "payload \(what) at \(Self.format(time)); leaf valid \(Self.format(chain.leaf.notValidBefore)) to \(Self.format(chain.leaf.notValidAfter)), intermediate valid \(Self.format(chain.intermediate.notValidBefore)) to \(Self.format(chain.intermediate.notValidAfter))"
    }

    static func format(_ date: Date) -> String {
        date.formatted(.iso8601)
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): "missing field \(key.stringValue)"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            "wrong type at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.dataCorrupted(let context):
            context.codingPath.isEmpty ? "not valid JSON" : "bad value at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        default: "undecodable"
        }
    }
}

/// Sends OCSP requests through the configured transport and remembers whether one of them got
/// no answer, so that an unreachable responder reads as "retry later" rather than as a
/// revoked certificate, and until when the answers hold (their earliest `nextUpdate`).
private final class FailureRecordingRequester: OCSPRequester {
    private let transport: any OCSPTransport
    private let failure = Mutex<String?>(nil)
    private let nextUpdate = Mutex<Date?>(nil)

    init(_ transport: any OCSPTransport) { self.transport = transport }

    var firstFailure: String? { failure.withLock { $0 } }
    var earliestNextUpdate: Date? { nextUpdate.withLock { $0 } }

    func query(request: [UInt8], uri: String) async -> OCSPRequesterQueryResult {
        do {
            let response = try await transport.send(request: request, to: uri)
            if let holds = OCSPAnswerValidity.nextUpdate(of: response) {
                nextUpdate.withLock { $0 = min($0 ?? holds, holds) }
            }
            return .response(response)
        } catch {
            failure.withLock { if $0 == nil { $0 = "\(uri): \(error)" } }
            return .terminalError(error)
        }
    }
}

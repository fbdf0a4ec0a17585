/// What verifying one signed payload found. Verification never throws: a payload that fails
/// is an ordinary outcome that the caller records and reports, and only infrastructure
/// failure (not the payload) stops a run.
public enum VerificationOutcome<Payload: Sendable>: Sendable {
    /// Signature, chain and identity all check out; the decoded payload can be trusted.
    case verified(Payload)
    /// The payload must never be applied.
    case rejected(Rejection)
    /// The payload could not be judged now (an online revocation check could not reach its
    /// responder); try again later.
    case retryLater(String)

    public var verifiedPayload: Payload? {
        if case .verified(let payload) = self { return payload }
        return nil
    }

    public var rejection: Rejection? {
        if case .rejected(let rejection) = self { return rejection }
        return nil
    }

    /// Carries a failure over to an outcome of another payload type.
    func map<Other>(_ transform: (Payload) -> VerificationOutcome<Other>) -> VerificationOutcome<Other> {
        switch self {
        case .verified(let payload): transform(payload)
        case .rejected(let rejection): .rejected(rejection)
        case .retryLater(let reason): .retryLater(reason)
        }
    }
}

/// Why a payload was rejected: a stable reason code plus a sentence for people.
/// Two rejections are equal when their reasons are, so tests can state the expected reason
/// without repeating the detail text.
public struct Rejection: Error, Hashable, Sendable, CustomStringConvertible {
    public var reason: RejectionReason
    public var detail: String

    public init(_ reason: RejectionReason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public static func == (lhs: Rejection, rhs: Rejection) -> Bool { lhs.reason == rhs.reason }
    public func hash(into hasher: inout Hasher) { hasher.combine(reason) }

    public var description: String { "\(reason.rawValue): \(detail)" }
}

/// The documented set of rejection reasons. The raw values are stable: they are stored in
/// `app_store.rejected_payloads.reason` and appear in reports.
public enum RejectionReason: String, Hashable, Sendable, CaseIterable, Codable {
    /// Not a compact JWS of three base64url parts, JSON that does not decode, a certificate
    /// that is not DER in standard base64, or an input over the size limit.
    case malformed
    /// The header's `alg` is not `ES256` (including `none`), or the leaf key is not P-256.
    case unsupportedAlgorithm = "unsupported_algorithm"
    /// `x5c` does not hold exactly three certificates.
    case badChainLength = "bad_chain_length"
    /// Leaf and intermediate do not chain to one of the configured root certificates.
    case untrustedChain = "untrusted_chain"
    /// A certificate of the chain is not valid at the effective time (the payload's
    /// `signedDate`, or now with online checks), or was revoked.
    case certificateNotValidAtTime = "certificate_not_valid_at_time"
    /// The leaf lacks OID 1.2.840.113635.100.6.11.1, or the intermediate lacks
    /// 1.2.840.113635.100.6.2.1 or is not a certificate authority.
    case missingAppleOID = "missing_apple_oid"
    /// The ES256 signature does not verify with the leaf's key (tampered header, payload or signature).
    case badSignature = "bad_signature"
    /// The payload is for another bundle ID.
    case wrongBundle = "wrong_bundle"
    /// The payload is for another app (`appAppleId`, compared in Production).
    case wrongApp = "wrong_app"
    /// The payload is from another environment (Sandbox data never lands in Production records).
    case wrongEnvironment = "wrong_environment"
    /// A notification's signed transaction, renewal info or app transaction was rejected.
    case nestedPayloadRejected = "nested_payload_rejected"

    /// Whether a payload rejected for this reason is proven to be Apple's: its signature and its
    /// chain to a configured root checked out, and it was refused for what it says (another app,
    /// another environment, a nested payload). For every other reason the bytes could be anyone's:
    /// a chain that does not validate (an expired one included: the validity check comes before
    /// the chain is trusted) proves nothing about who signed.
    public var provesItsSigner: Bool {
        switch self {
        case .wrongBundle, .wrongApp, .wrongEnvironment, .nestedPayloadRejected: true
        case .malformed, .unsupportedAlgorithm, .badChainLength, .untrustedChain, .certificateNotValidAtTime, .missingAppleOID, .badSignature: false
        }
    }

    /// One line a person understands.
    public var explanation: String {
        switch self {
        case .malformed: "the payload is not a well-formed signed App Store payload"
        case .unsupportedAlgorithm: "the payload is not signed with ES256, the only algorithm Apple uses"
        case .badChainLength: "the certificate chain in x5c does not have exactly three certificates"
        case .untrustedChain: "the certificate chain does not lead to a configured Apple root certificate"
        case .certificateNotValidAtTime: "a certificate of the chain was not valid when the payload was signed"
        case .missingAppleOID: "a certificate lacks the marker extension Apple puts in its signing certificates"
        case .badSignature: "the signature does not match the content: the payload was altered"
        case .wrongBundle: "the payload is for another bundle ID than the configured one"
        case .wrongApp: "the payload is for another app (appAppleId) than the configured one"
        case .wrongEnvironment: "the payload is from another App Store environment than the configured one"
        case .nestedPayloadRejected: "a signed transaction or renewal info inside the notification failed verification"
        }
    }
}

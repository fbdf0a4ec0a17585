import Crypto
import Foundation
import SwiftASN1
import X509

/// Leaf and intermediate from a payload's `x5c`, parsed and checked for everything that does
/// not depend on time: three certificates, DER in standard base64, Apple's marker extensions,
/// a P-256 leaf key. The third certificate (the root Apple sends) is parsed but never trusted:
/// the chain must lead to a root the operator configured.
struct AppleCertificateChain: Sendable {
    let leaf: Certificate
    let intermediate: Certificate
    let leafKey: P256.Signing.PublicKey

    /// Extension Apple puts in the App Store receipt-signing leaf.
    static let leafMarkerOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    /// Extension of the Apple Worldwide Developer Relations intermediate.
    static let intermediateMarkerOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    /// Parses and checks a header segment; the result is a value, never a throw.
    static func parse(headerSegment: Substring) -> Result<AppleCertificateChain, Rejection> {
        guard let headerBytes = Base64URL.decode(headerSegment) else {
            return .failure(Rejection(.malformed, "the JWS header is not base64url"))
        }
        // Parsed once per distinct header (ChainCache), so the scan for a repeated key costs once.
        switch RepeatedJSONKey.scan(headerBytes) {
        case .repeated(let key): return .failure(Rejection(.malformed, "the JWS header gives the key \(RepeatedJSONKey.quoted(key)) more than once"))
        case .unreadable: return .failure(Rejection(.malformed, "the JWS header is not a JSON object of the expected shape"))
        case .distinct: break
        }
        guard let header = try? JSONDecoder().decode(JWSHeader.self, from: Data(headerBytes)) else {
            return .failure(Rejection(.malformed, "the JWS header is not a JSON object of the expected shape"))
        }
        guard let algorithm = header.alg else {
            return .failure(Rejection(.unsupportedAlgorithm, "the JWS header names no algorithm"))
        }
        guard algorithm == "ES256" else {
            return .failure(Rejection(.unsupportedAlgorithm, "the JWS header's alg is \"\(algorithm.prefix(20))\", not ES256"))
        }
        let encoded = header.x5c ?? []
        guard encoded.count == 3 else {
            return .failure(Rejection(.badChainLength, "x5c holds \(encoded.count) certificates; Apple sends exactly 3"))
        }
        var certificates: [Certificate] = []
        for (index, text) in encoded.enumerated() {
            guard let der = Data(base64Encoded: text) else {
                return .failure(Rejection(.malformed, "x5c[\(index)] is not standard base64"))
            }
            guard let certificate = try? Certificate(derEncoded: Array(der)) else {
                return .failure(Rejection(.malformed, "x5c[\(index)] is not a DER X.509 certificate"))
            }
            certificates.append(certificate)
        }
        let leaf = certificates[0]
        let intermediate = certificates[1]
        guard leaf.extensions[oid: leafMarkerOID] != nil else {
            return .failure(Rejection(.missingAppleOID, "the leaf certificate lacks extension 1.2.840.113635.100.6.11.1"))
        }
        guard intermediate.extensions[oid: intermediateMarkerOID] != nil else {
            return .failure(Rejection(.missingAppleOID, "the intermediate certificate lacks extension 1.2.840.113635.100.6.2.1"))
        }
        guard isCertificateAuthority(intermediate) else {
            return .failure(Rejection(.missingAppleOID, "the intermediate certificate is not a certificate authority"))
        }
        guard let key = P256.Signing.PublicKey(leaf.publicKey) else {
            return .failure(Rejection(.unsupportedAlgorithm, "the leaf certificate's key is not a P-256 key"))
        }
        return .success(AppleCertificateChain(leaf: leaf, intermediate: intermediate, leafKey: key))
    }

    private static func isCertificateAuthority(_ certificate: Certificate) -> Bool {
        if case .isCertificateAuthority = try? certificate.extensions.basicConstraints { return true }
        return false
    }

    /// The times at which both leaf and intermediate are within their validity periods
    /// (RFC 5280: notBefore ≤ t ≤ notAfter). Nil when the periods do not overlap.
    var ownValidity: ClosedRange<Date>? {
        let start = max(leaf.notValidBefore, intermediate.notValidBefore)
        let end = min(leaf.notValidAfter, intermediate.notValidAfter)
        return start <= end ? start...end : nil
    }
}

/// Marks Apple's two marker extensions as understood, so a chain is not refused only because
/// Apple flags them critical; their presence is checked before validation.
struct AppleMarkerExtensionsPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [
        AppleCertificateChain.leafMarkerOID, AppleCertificateChain.intermediateMarkerOID,
    ]

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        .meetsPolicy
    }
}

package import Crypto
import Foundation
import SignedData

/// Signs payloads as Apple does: compact JWS, ES256 (64-byte r‖s), `x5c` in the header.
/// The header is encoded once; signing a payload costs one JSON encode and one signature.
package struct JWSSigner: Sendable {
    package let key: P256.Signing.PrivateKey
    package let encodedHeader: String

    /// - Parameters:
    ///   - algorithm: what the header claims; tests set other values to build bad payloads.
    ///   - x5c: the certificate entries to put in the header, in order.
    package init(key: P256.Signing.PrivateKey, x5c: [String], algorithm: String = "ES256") throws {
        struct Header: Encodable {
            var alg: String
            var x5c: [String]
        }
        self.key = key
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        self.encodedHeader = Base64URL.encode(try encoder.encode(Header(alg: algorithm, x5c: x5c)))
    }

    /// Signs a payload value encoded as JSON.
    package func sign(_ payload: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try sign(json: Array(encoder.encode(payload)))
    }

    /// Signs raw payload bytes (which need not be valid JSON, for tests of malformed payloads).
    package func sign(json: [UInt8]) throws -> String {
        let signingInput = encodedHeader + "." + Base64URL.encode(json)
        let signature = try key.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}

public import Crypto
public import Foundation
import SignedData
import Synchronization

/// The credentials for the App Store Server API: an In-App Purchase key (ES256) with its key ID,
/// the issuer ID and the app's bundle ID. The key never leaves this value: its description
/// names only the key ID.
public struct APICredentials: Sendable, CustomStringConvertible {
    public var issuerId: String
    public var keyId: String
    public var bundleId: String
    public var signingKey: P256.Signing.PrivateKey

    public init(issuerId: String, keyId: String, bundleId: String, signingKey: P256.Signing.PrivateKey) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.bundleId = bundleId
        self.signingKey = signingKey
    }

    /// Reads the `.p8` file App Store Connect provides (a PKCS#8 PEM P-256 key).
    public static func signingKey(pem: String) throws -> P256.Signing.PrivateKey {
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw APICredentialsError(description: "the private key is not a PEM-encoded P-256 (ES256) key as App Store Connect issues")
        }
    }

    public var description: String { "APICredentials(keyId: \(keyId), issuerId: \(issuerId), bundleId: \(bundleId))" }
}

public struct APICredentialsError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// Issues the signed JWT sent as `Authorization: Bearer`: header `alg` ES256, `kid`, `typ` JWT;
/// claims `iss`, `iat`, `exp`, `aud` appstoreconnect-v1, `bid`. A token lives `lifetime` (Apple
/// refuses more than 60 minutes) and is reused until `renewalMargin` before it expires.
public final class BearerTokenIssuer: Sendable {
    public let credentials: APICredentials
    public let lifetime: TimeInterval
    public let renewalMargin: TimeInterval
    private let cached = Mutex<(token: String, expires: Date)?>(nil)

    public init(credentials: APICredentials, lifetime: TimeInterval = 300, renewalMargin: TimeInterval = 60) {
        precondition(lifetime <= 3600, "Apple refuses tokens that expire more than 60 minutes after iat")
        self.credentials = credentials
        self.lifetime = lifetime
        self.renewalMargin = renewalMargin
    }

    public func token(now: Date = Date()) throws -> String {
        if let current = cached.withLock({ $0 }), current.expires.timeIntervalSince(now) > renewalMargin {
            return current.token
        }
        let issued = now.timeIntervalSince1970.rounded(.down)
        let token = try Self.sign(credentials, issuedAt: Int64(issued), expiresAt: Int64(issued + lifetime))
        cached.withLock { $0 = (token, Date(timeIntervalSince1970: issued + lifetime)) }
        return token
    }

    struct Header: Codable {
        var alg: String
        var kid: String
        var typ: String
    }

    struct Claims: Codable {
        var iss: String
        var iat: Int64
        var exp: Int64
        var aud: String
        var bid: String
    }

    static func sign(_ credentials: APICredentials, issuedAt: Int64, expiresAt: Int64) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let header = Base64URL.encode(try encoder.encode(Header(alg: "ES256", kid: credentials.keyId, typ: "JWT")))
        let claims = Base64URL.encode(
            try encoder.encode(
                Claims(iss: credentials.issuerId, iat: issuedAt, exp: expiresAt, aud: "appstoreconnect-v1", bid: credentials.bundleId)
            )
        )
        let signingInput = header + "." + claims
        let signature = try credentials.signingKey.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}

/// The key type of an In-App Purchase key, for modules that do not import Crypto.
public typealias P256SigningKey = P256.Signing.PrivateKey

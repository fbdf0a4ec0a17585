import Crypto
import Foundation

/// The API key the simulator accepts, as App Store Connect would issue one: key ID, issuer ID
/// and a P-256 private key (served to clients as a `.p8` PEM file).
public struct SimulatorCredentials: Sendable {
    public let keyId: String
    public let issuerId: String
    public let privateKey: P256.Signing.PrivateKey

    public init(keyId: String = "SIMKEY0001", issuerId: String = "57246542-96fe-1a63-e053-0824d011072a") {
        self.keyId = keyId
        self.issuerId = issuerId
        self.privateKey = P256.Signing.PrivateKey()
    }

    /// The key in the `.p8` form App Store Connect hands out.
    public var privateKeyPEM: String { privateKey.pemRepresentation }
}

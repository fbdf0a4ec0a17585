package import Crypto
import Foundation

/// The API key the simulator accepts, as App Store Connect would issue one: key ID, issuer ID
/// and a P-256 private key (served to clients as a `.p8` PEM file).
package struct SimulatorCredentials: Sendable {
    package let keyId: String
    package let issuerId: String
    package let privateKey: P256.Signing.PrivateKey

    package init(keyId: String = "SIMKEY0001", issuerId: String = "57246542-96fe-1a63-e053-0824d011072a") {
        self.keyId = keyId
        self.issuerId = issuerId
        self.privateKey = P256.Signing.PrivateKey()
    }

    /// The key in the `.p8` form App Store Connect hands out.
    package var privateKeyPEM: String { privateKey.pemRepresentation }
}

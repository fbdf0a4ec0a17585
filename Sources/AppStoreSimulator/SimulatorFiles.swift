import Foundation
import SignedData

/// The files a client of the simulator is configured with: the API key as a `.p8` file
/// (readable by its owner only, as a real key should be) and the root certificate in PEM.
package struct SimulatorFiles: Sendable {
    package let directory: String
    package let privateKeyPath: String
    package let rootCertificatePath: String

    package static func write(for api: SimulatedAPI, in directory: String) throws -> SimulatorFiles {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let key = directory + "/AuthKey_\(api.credentials.keyId).p8"
        let root = directory + "/SimulatorRootCA.pem"
        try api.credentials.privateKeyPEM.write(toFile: key, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        try api.pki.rootPEM().write(toFile: root, atomically: true, encoding: .utf8)
        return SimulatorFiles(directory: directory, privateKeyPath: key, rootCertificatePath: root)
    }

    /// The configuration variables that point appstore-reconcile at the simulator.
    package func environment(for api: SimulatedAPI, baseURL: String) -> [(String, String)] {
        let configuration = api.scenario.configuration
        var variables = [
            ("APPSTORE_API_BASE_URL", baseURL),
            ("APPSTORE_ISSUER_ID", api.credentials.issuerId),
            ("APPSTORE_KEY_ID", api.credentials.keyId),
            ("APPSTORE_PRIVATE_KEY", privateKeyPath),
            ("APPSTORE_BUNDLE_ID", configuration.bundleId),
            ("APPSTORE_ENVIRONMENT", configuration.environment.rawValue),
            ("APPSTORE_ROOT_CERTIFICATES", rootCertificatePath),
        ]
        if configuration.environment == .production { variables.append(("APPSTORE_APP_APPLE_ID", String(configuration.appAppleId))) }
        return variables
    }
}

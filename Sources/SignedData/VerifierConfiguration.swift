public import Foundation
import SwiftASN1
public import X509

/// What a payload must match to be trusted: the operator's root certificates and the app.
public struct VerifierConfiguration: Sendable {
    /// Apple root certificates the operator downloaded and configured. The root a payload
    /// carries in its own `x5c` is never trusted by itself.
    public var rootCertificates: [Certificate]
    public var bundleId: String
    /// The app's App Store ID. Required in Production, where notifications are checked
    /// against it; sandbox payloads do not carry it.
    public var appAppleId: Int64?
    public var environment: AppStoreEnvironment
    /// Larger inputs are rejected as malformed before any parsing. Real notifications, with
    /// their two nested signed payloads, are around 15 KB.
    public var maximumPayloadBytes: Int
    /// Off (nil) by default: historical data is checked at its `signedDate`. On: certificates
    /// are checked at the current time with OCSP revocation checks, for data received just now.
    public var onlineChecks: OnlineChecks?

    public init(
        rootCertificates: [Certificate], bundleId: String, appAppleId: Int64?, environment: AppStoreEnvironment,
        maximumPayloadBytes: Int = 256 * 1024, onlineChecks: OnlineChecks? = nil
    ) {
        self.rootCertificates = rootCertificates
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environment = environment
        self.maximumPayloadBytes = maximumPayloadBytes
        self.onlineChecks = onlineChecks
    }

    /// The App Store (app and environment) whose payloads this configuration accepts.
    public var pair: AppStorePair { AppStorePair(bundleId: bundleId, environment: environment) }
}

/// Current-time validation with OCSP revocation checks of the leaf and the intermediate.
public struct OnlineChecks: Sendable {
    /// Carries OCSP requests to the responders named in the certificates. A failure to get an
    /// answer makes the outcome "retry later", never "rejected".
    public var transport: any OCSPTransport
    public var now: @Sendable () -> Date

    public init(transport: any OCSPTransport, now: @escaping @Sendable () -> Date = { Date() }) {
        self.transport = transport
        self.now = now
    }
}

/// A configuration the verifier cannot work with.
public struct VerifierConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
}

/// Reads root certificates from DER or PEM files, as downloaded from Apple's certificate
/// authority page.
public enum RootCertificateLoader {
    public static func load(paths: [String]) throws -> [Certificate] {
        try paths.map { path in
            guard let data = FileManager.default.contents(atPath: path) else {
                throw VerifierConfigurationError(description: "cannot read root certificate file \(path)")
            }
            return try certificate(from: Array(data), source: path)
        }
    }

    public static func certificate(from bytes: [UInt8], source: String) throws -> Certificate {
        if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN CERTIFICATE-----") {
            do {
                return try Certificate(pemEncoded: text)
            } catch {
                throw VerifierConfigurationError(description: "\(source) is not a valid PEM certificate")
            }
        }
        do {
            return try Certificate(derEncoded: bytes)
        } catch {
            throw VerifierConfigurationError(description: "\(source) is neither a DER nor a PEM certificate")
        }
    }
}

/// Carries one DER-encoded OCSP request to a responder and returns its DER-encoded answer.
/// Throws when no answer could be had (network failure, non-200 status, timeout).
public protocol OCSPTransport: Sendable {
    func send(request: [UInt8], to uri: String) async throws -> [UInt8]
}

/// The certificate type roots are configured as, for modules that do not import X509.
public typealias X509Certificate = Certificate

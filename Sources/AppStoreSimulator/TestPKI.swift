package import Crypto
package import Foundation
import SignedData
import SwiftASN1
package import X509

/// A root, an Apple-like intermediate and a leaf, minted on the spot, that sign payloads the way
/// Apple does (ES256 JWS with an x5c chain). Tests, the simulator and the demo use it; no key or
/// certificate is ever checked in. Every property that verification depends on can be bent, so
/// tests can produce each kind of bad chain.
package struct TestPKI: Sendable {
    /// How to mint the chain. The defaults resemble Apple's: a long-lived root, an intermediate
    /// of several years, a leaf of about two years, all around `referenceTime`.
    package struct Options: Sendable {
        package var referenceTime: Date
        package var rootValidity: ClosedRange<Date>?
        package var intermediateValidity: ClosedRange<Date>?
        package var leafValidity: ClosedRange<Date>?
        package var leafHasAppleMarker = true
        package var intermediateHasAppleMarker = true
        package var intermediateIsCertificateAuthority = true
        package var rootCommonName = "Test Root CA - G3"
        /// Where OCSP requests for the leaf and intermediate go (Authority Information Access).
        package var ocspResponderURL: String?

        package init(referenceTime: Date = Date()) {
            self.referenceTime = referenceTime
        }
    }

    package let rootKey: P256.Signing.PrivateKey
    package let root: Certificate
    package let intermediateKey: P256.Signing.PrivateKey
    package let intermediate: Certificate
    package let leafKey: P256.Signing.PrivateKey
    package let leaf: Certificate

    private static let day: TimeInterval = 86_400

    package init(_ options: Options = Options()) throws {
        let now = options.referenceTime
        let rootKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName {
            CommonName(options.rootCommonName)
            OrganizationalUnitName("Test Certification Authority")
            OrganizationName("appstore-reconcile test PKI")
            CountryName("US")
        }
        let rootValidity = options.rootValidity ?? (now - 3650 * Self.day)...(now + 3650 * Self.day)
        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey),
            notValidBefore: rootValidity.lowerBound, notValidAfter: rootValidity.upperBound,
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: .init(rootKey.publicKey))
            },
            issuerPrivateKey: .init(rootKey)
        )
        let intermediateKey = P256.Signing.PrivateKey()
        let (intermediate, intermediateName) = try Self.intermediate(options, key: intermediateKey, rootKey: rootKey, rootName: rootName)
        let leafKey = P256.Signing.PrivateKey()
        let leaf = try Self.leaf(options, key: leafKey, intermediateKey: intermediateKey, intermediateName: intermediateName)
        self.rootKey = rootKey
        self.root = root
        self.intermediateKey = intermediateKey
        self.intermediate = intermediate
        self.leafKey = leafKey
        self.leaf = leaf
    }

    /// Where the intermediate and the leaf say their OCSP responder is, if anywhere.
    private static func ocspAccess(_ options: Options) -> AuthorityInformationAccess? {
        options.ocspResponderURL.map { url in
            AuthorityInformationAccess([.init(method: .ocspServer, location: .uniformResourceIdentifier(url))])
        }
    }

    /// The intermediate (Apple's WWDR G6 in shape), signed by the root, and its name.
    private static func intermediate(
        _ options: Options, key: P256.Signing.PrivateKey, rootKey: P256.Signing.PrivateKey, rootName: DistinguishedName
    ) throws -> (Certificate, DistinguishedName) {
        let now = options.referenceTime
        let name = try DistinguishedName {
            CommonName("Test Worldwide Developer Relations Certification Authority")
            OrganizationalUnitName("G6")
            OrganizationName("appstore-reconcile test PKI")
            CountryName("US")
        }
        let validity = options.intermediateValidity ?? (now - 1000 * Self.day)...(now + 1500 * Self.day)
        let ocspAccess = ocspAccess(options)
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: validity.lowerBound, notValidAfter: validity.upperBound,
            issuer: rootName, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                if options.intermediateIsCertificateAuthority {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                } else {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                }
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: .init(rootKey.publicKey)).keyIdentifier)
                SubjectKeyIdentifier(hash: .init(key.publicKey))
                if options.intermediateHasAppleMarker {
                    Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 2, 1], critical: false, value: [0x05, 0x00])
                }
                if let ocspAccess { ocspAccess }
            },
            issuerPrivateKey: .init(rootKey)
        )
        return (certificate, name)
    }

    /// The signing leaf (Apple's receipt-signing certificate in shape), signed by the intermediate.
    private static func leaf(
        _ options: Options, key: P256.Signing.PrivateKey, intermediateKey: P256.Signing.PrivateKey, intermediateName: DistinguishedName
    ) throws -> Certificate {
        let now = options.referenceTime
        let name = try DistinguishedName {
            CommonName("Test ECC Mac App Store and iTunes Store Receipt Signing")
            OrganizationalUnitName("Test Worldwide Developer Relations")
            OrganizationName("appstore-reconcile test PKI")
            CountryName("US")
        }
        let validity = options.leafValidity ?? (now - 365 * Self.day)...(now + 395 * Self.day)
        let ocspAccess = ocspAccess(options)
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: validity.lowerBound, notValidAfter: validity.upperBound,
            issuer: intermediateName, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: .init(intermediateKey.publicKey)).keyIdentifier)
                if options.leafHasAppleMarker {
                    Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 11, 1], critical: false, value: [0x05, 0x00])
                }
                if let ocspAccess { ocspAccess }
            },
            issuerPrivateKey: .init(intermediateKey)
        )
    }

    /// The root in PEM, as an operator would configure it.
    package func rootPEM() throws -> String {
        try root.serializeAsPEM().pemString
    }

    /// DER of a certificate, standard base64, as `x5c` carries it.
    package static func x5cEntry(_ certificate: Certificate) throws -> String {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Data(serializer.serializedBytes).base64EncodedString()
    }

    /// A signer with a new leaf issued by this chain's intermediate, for payloads that must fail
    /// on the leaf alone (no Apple marker, or not valid when signed).
    package func signer(leafValidity: ClosedRange<Date>, leafHasAppleMarker: Bool) throws -> JWSSigner {
        let key = P256.Signing.PrivateKey()
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: leafValidity.lowerBound, notValidAfter: leafValidity.upperBound,
            issuer: intermediate.subject, subject: self.leaf.subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: .init(intermediateKey.publicKey)).keyIdentifier)
                if leafHasAppleMarker {
                    Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 11, 1], critical: false, value: [0x05, 0x00])
                }
            },
            issuerPrivateKey: .init(intermediateKey)
        )
        return try JWSSigner(key: key, x5c: [Self.x5cEntry(leaf), Self.x5cEntry(intermediate), Self.x5cEntry(root)])
    }

    /// A signer that uses this chain's leaf, with the usual header.
    package func signer() throws -> JWSSigner {
        try JWSSigner(
            key: leafKey,
            x5c: [Self.x5cEntry(leaf), Self.x5cEntry(intermediate), Self.x5cEntry(root)]
        )
    }
}

import Crypto
package import Foundation
import SwiftASN1
package import X509

/// An OCSP responder (RFC 6960) for the test PKI: it answers each request about the leaf or the
/// intermediate with a response signed by that certificate's issuer, whose `responderID` names
/// the issuer, echoing the request's CertID and nonce. Tests count its answers to see how often a
/// verifier asks; `revoked` makes it answer "revoked" for chosen certificates.
///
/// Built on SwiftASN1's DER serializer; swift-certificates parses and checks what it produces, so
/// an answer it gets wrong fails verification rather than passing unnoticed.
package struct TestOCSPResponder: Sendable {
    package let pki: TestPKI
    /// The responder's clock: `producedAt` and `thisUpdate`; `nextUpdate` is `answersHold` later.
    package var now: @Sendable () -> Date
    package var answersHold: TimeInterval = 3_600
    /// Certificates answered as revoked (the leaf, the intermediate).
    package var revoked: [Certificate] = []

    package init(pki: TestPKI, now: @escaping @Sendable () -> Date = { Date() }) {
        self.pki = pki
        self.now = now
    }

    package struct UnanswerableRequest: Error, CustomStringConvertible {
        package var description: String
    }

    /// The DER of an OCSPResponse answering `request` (the DER of an OCSPRequest).
    package func respond(to request: [UInt8]) throws -> [UInt8] {
        let parsed = try Self.parse(request)
        let issuer: (certificate: Certificate, key: P256.Signing.PrivateKey)
        let serial: Certificate.SerialNumber
        let asked = Certificate.SerialNumber(bytes: parsed.serial)
        if asked == pki.leaf.serialNumber {
            (issuer, serial) = ((pki.intermediate, pki.intermediateKey), asked)
        } else if asked == pki.intermediate.serialNumber {
            (issuer, serial) = ((pki.root, pki.rootKey), asked)
        } else {
            throw UnanswerableRequest(description: "no certificate of the test PKI has that serial number")
        }

        let time = now()
        var data = DER.Serializer()
        try data.appendConstructedNode(identifier: .sequence) { responseData in
            // version v1 is the DEFAULT, so absent; responderID byName [1].
            try responseData.serialize(issuer.certificate.subject, explicitlyTaggedWithTagNumber: 1, tagClass: .contextSpecific)
            try responseData.serialize(Self.generalizedTime(time))
            try responseData.appendConstructedNode(identifier: .sequence) { responses in
                try responses.appendConstructedNode(identifier: .sequence) { single in
                    single.serializeRawBytes(parsed.certID)
                    if revoked.contains(where: { $0.serialNumber == serial }) {
                        try single.appendConstructedNode(identifier: ASN1Identifier(tagWithNumber: 1, tagClass: .contextSpecific)) { revoked in
                            try revoked.serialize(Self.generalizedTime(time - 86_400))
                        }
                    } else {
                        single.appendPrimitiveNode(identifier: ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)) { _ in }
                    }
                    try single.serialize(Self.generalizedTime(time))
                    try single.serialize(Self.generalizedTime(time + answersHold), explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific)
                }
            }
            if let extensions = parsed.extensions {
                responseData.appendConstructedNode(identifier: ASN1Identifier(tagWithNumber: 1, tagClass: .contextSpecific)) {
                    $0.serializeRawBytes(extensions)
                }
            }
        }
        let tbs = data.serializedBytes
        let signature = try issuer.key.signature(for: tbs).derRepresentation

        var basic = DER.Serializer()
        try basic.appendConstructedNode(identifier: .sequence) { response in
            response.serializeRawBytes(tbs)
            try response.appendConstructedNode(identifier: .sequence) { algorithm in
                try algorithm.serialize(ASN1ObjectIdentifier.ecdsaSignatureWithSHA256)
            }
            try response.serialize(ASN1BitString(bytes: ArraySlice(signature)))
        }

        var outer = DER.Serializer()
        try outer.appendConstructedNode(identifier: .sequence) { response in
            response.appendPrimitiveNode(identifier: .enumerated) { $0.append(0) }  // successful
            try response.appendConstructedNode(identifier: ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)) { explicit in
                try explicit.appendConstructedNode(identifier: .sequence) { bytes in
                    try bytes.serialize(ASN1ObjectIdentifier.basicOCSPResponse)
                    try bytes.serialize(ASN1OctetString(contentBytes: ArraySlice(basic.serializedBytes)))
                }
            }
        }
        return outer.serializedBytes
    }

    /// The first request's CertID (its DER), its serial number's bytes, and the request's
    /// extensions (the DER of the Extensions SEQUENCE), from an OCSPRequest.
    static func parse(_ request: [UInt8]) throws -> (certID: ArraySlice<UInt8>, serial: ArraySlice<UInt8>, extensions: ArraySlice<UInt8>?) {
        let root = try DER.parse(request)
        guard let tbs = children(root).first else { throw UnanswerableRequest(description: "no tbsRequest") }
        let parts = children(tbs)
        guard let list = parts.first(where: { $0.identifier == .sequence }),
            let first = children(list).first, let certID = children(first).first
        else { throw UnanswerableRequest(description: "no request in the requestList") }
        guard let serialNode = children(certID).last, case .primitive(let serial) = serialNode.content else {
            throw UnanswerableRequest(description: "no serial number in the CertID")
        }
        let extensions = parts.first { $0.identifier == ASN1Identifier(tagWithNumber: 2, tagClass: .contextSpecific) }
            .flatMap { children($0).first?.encodedBytes }
        return (certID.encodedBytes, serial, extensions)
    }

    private static func children(_ node: ASN1Node) -> [ASN1Node] {
        guard case .constructed(let nodes) = node.content else { return [] }
        return Array(nodes)
    }

    private static func generalizedTime(_ date: Date) throws -> GeneralizedTime {
        let parts = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: date)
        return try GeneralizedTime(
            year: parts.year!, month: parts.month!, day: parts.day!, hours: parts.hour!, minutes: parts.minute!,
            seconds: parts.second!, fractionalSeconds: 0
        )
    }
}

extension ASN1ObjectIdentifier {
    /// id-pkix-ocsp-basic (RFC 6960 §4.2.1).
    fileprivate static let basicOCSPResponse: ASN1ObjectIdentifier = [1, 3, 6, 1, 5, 5, 7, 48, 1, 1]
    /// ecdsa-with-SHA256 (RFC 5758 §3.2).
    fileprivate static let ecdsaSignatureWithSHA256: ASN1ObjectIdentifier = [1, 2, 840, 10045, 4, 3, 2]
}

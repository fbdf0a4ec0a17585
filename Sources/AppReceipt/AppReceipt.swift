import Foundation
import SwiftASN1

/// What an app receipt (the base64 blob apps sent to verifyReceipt) names: its bundle ID and its
/// in-app purchase records' IDs, read and nothing more.
///
/// A receipt is a PKCS#7 SignedData (OID 1.2.840.113549.1.7.2) whose content is a SET of
/// attributes `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`; attribute 17 holds
/// one in-app purchase as a SET of the same shape (1702 product ID, 1703 transaction ID, 1705
/// original transaction ID). Receipts made by Xcode are BER with indefinite lengths at every level
/// and wrap the content in a constructed OCTET STRING; those from the App Store are DER. Both are
/// parsed as BER. The receipt's signature is not checked: its IDs are only questions for the App
/// Store Server API, whose signed answers are verified and stored.
package struct AppReceipt: Sendable, Equatable {
    /// One in-app purchase record of the receipt.
    package struct Purchase: Sendable, Equatable {
        package var productId: String?
        package var transactionId: String?
        package var originalTransactionId: String?

        package init(productId: String? = nil, transactionId: String? = nil, originalTransactionId: String? = nil) {
            self.productId = productId
            self.transactionId = transactionId
            self.originalTransactionId = originalTransactionId
        }
    }

    package var bundleId: String?
    /// Attribute 0: "Production", "ProductionSandbox" (App Review, TestFlight), "Xcode" (StoreKit
    /// testing in Xcode); nil when the receipt has none.
    package var receiptType: String?
    /// In the receipt's order (Apple documents the records as unordered).
    package var purchases: [Purchase]

    package init(bundleId: String?, receiptType: String? = nil, purchases: [Purchase]) {
        self.bundleId = bundleId
        self.receiptType = receiptType
        self.purchases = purchases
    }

    /// The IDs to ask Apple with, each once: original transaction IDs first (one per
    /// subscription or purchase), then transaction IDs the records name without one.
    package var transactionIds: [String] {
        var seen: Set<String> = []
        var ids: [String] = []
        for id in purchases.compactMap(\.originalTransactionId) + purchases.compactMap(\.transactionId) where seen.insert(id).inserted {
            ids.append(id)
        }
        return ids
    }

    /// Attribute types of the receipt and of its in-app records (Apple's receipt fields).
    enum Field {
        static let receiptType = 0
        static let bundleId = 2
        static let inAppPurchase = 17
        static let productId = 1702
        static let transactionId = 1703
        static let originalTransactionId = 1705
    }

    static let signedDataOID: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 7, 2]

    /// Reads a receipt from its base64 text (whitespace and line breaks ignored).
    package init(base64 text: some StringProtocol) throws(AppReceiptError) {
        let cleaned = text.filter { !$0.isWhitespace }
        guard !cleaned.isEmpty else { throw .empty }
        guard let data = Data(base64Encoded: String(cleaned)) else { throw .notBase64 }
        try self.init(bytes: [UInt8](data))
    }

    /// Reads a receipt from its bytes (BER or DER).
    package init(bytes: [UInt8]) throws(AppReceiptError) {
        do {
            let content = try Self.signedContent(try BER.parse(bytes))
            self = try Self.payload(content)
        } catch let error as AppReceiptError {
            throw error
        } catch {
            throw .malformed("\(error)")
        }
    }

    /// The content of the SignedData's encapsulated ContentInfo: the receipt's attributes.
    private static func signedContent(_ root: ASN1Node) throws -> ArraySlice<UInt8> {
        try BER.sequence(root, identifier: .sequence) { nodes in
            let type = try ASN1ObjectIdentifier(berEncoded: &nodes)
            guard type == signedDataOID else { throw AppReceiptError.notSignedData }
            return try BER.explicitlyTagged(&nodes, tagNumber: 0, tagClass: .contextSpecific) { signedData in
                try BER.sequence(signedData, identifier: .sequence) { fields in
                    _ = try Int(berEncoded: &fields)  // version
                    guard fields.next() != nil else { throw AppReceiptError.malformed("no digest algorithms") }
                    guard let encapsulated = fields.next() else { throw AppReceiptError.malformed("no encapsulated content") }
                    let content = try BER.sequence(encapsulated, identifier: .sequence) { inner in
                        _ = try ASN1ObjectIdentifier(berEncoded: &inner)
                        guard let tagged = inner.next() else { throw AppReceiptError.malformed("a receipt without content") }
                        return try BER.explicitlyTagged(tagged, tagNumber: 0, tagClass: .contextSpecific) { octets in
                            try octetBytes(octets)
                        }
                    }
                    // The certificates and signer infos that follow are not read: nothing in them is trusted.
                    while fields.next() != nil {}
                    return content
                }
            }
        }
    }

    /// An OCTET STRING's bytes, primitive or constructed (Xcode's receipts nest one in another).
    private static func octetBytes(_ node: ASN1Node) throws -> ArraySlice<UInt8> {
        try ASN1OctetString(berEncoded: node).bytes
    }

    /// The receipt's attributes: its bundle ID and in-app records.
    private static func payload(_ bytes: ArraySlice<UInt8>) throws -> AppReceipt {
        var receipt = AppReceipt(bundleId: nil, purchases: [])
        for (type, value) in try attributes(BER.parse(bytes)) {
            switch type {
            case Field.bundleId: receipt.bundleId = try? text(value)
            case Field.receiptType: receipt.receiptType = try? text(value)
            case Field.inAppPurchase: receipt.purchases.append(try purchase(value))
            default: continue
            }
        }
        return receipt
    }

    private static func purchase(_ bytes: ArraySlice<UInt8>) throws -> Purchase {
        var purchase = Purchase()
        for (type, value) in try attributes(BER.parse(bytes)) {
            switch type {
            case Field.productId: purchase.productId = try text(value)
            case Field.transactionId: purchase.transactionId = try text(value)
            case Field.originalTransactionId: purchase.originalTransactionId = try text(value)
            default: continue
            }
        }
        return purchase
    }

    /// A SET of `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`, as (type, value).
    private static func attributes(_ node: ASN1Node) throws -> [(Int, ArraySlice<UInt8>)] {
        guard node.identifier == .set, case .constructed(let children) = node.content else {
            throw AppReceiptError.malformed("the receipt's attributes are not a SET")
        }
        return try children.map { child in
            try BER.sequence(child, identifier: .sequence) { fields in
                let type = try Int(berEncoded: &fields)
                _ = try Int(berEncoded: &fields)
                guard let value = fields.next() else { throw AppReceiptError.malformed("attribute \(type) without a value") }
                return (type, try octetBytes(value))
            }
        }
    }

    /// A UTF8String or IA5String attribute value.
    private static func text(_ bytes: ArraySlice<UInt8>) throws -> String {
        let node = try BER.parse(bytes)
        let content: ArraySlice<UInt8>
        switch node.identifier {
        case .utf8String: content = try ASN1UTF8String(berEncoded: node).bytes
        case .ia5String: content = try ASN1IA5String(berEncoded: node).bytes
        default: throw AppReceiptError.malformed("a text field of type \(node.identifier)")
        }
        guard let string = String(validating: content, as: UTF8.self) else { throw AppReceiptError.malformed("a text field that is not UTF-8") }
        return string
    }
}

/// Why a line is not an app receipt the tool can read.
package enum AppReceiptError: Error, Equatable, Sendable, CustomStringConvertible {
    case empty
    case notBase64
    case notSignedData
    case malformed(String)

    package var description: String {
        switch self {
        case .empty: "an empty receipt"
        case .notBase64: "not base64"
        case .notSignedData: "not a PKCS#7 signed-data receipt"
        case .malformed(let detail): "not an app receipt (\(detail.prefix(120)))"
        }
    }
}

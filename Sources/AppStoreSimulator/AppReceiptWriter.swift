import Foundation
import SignedData
import SwiftASN1

/// The app receipts a simulated customer's device would have held (what apps once sent to
/// verifyReceipt): a PKCS#7 SignedData around the receipt's attribute SET, with the bundle ID and
/// one in-app record per transaction (product ID 1702, transaction ID 1703, original transaction
/// ID 1705). Not signed: the tool trusts nothing in a receipt but the IDs it names, and signs
/// nothing into one. `indefiniteLengths` writes the outer layers as Xcode does (BER, indefinite
/// lengths, the content in a constructed OCTET STRING); otherwise DER as the App Store writes.
package enum AppReceiptWriter {
    package struct Record: Sendable {
        package var productId: String
        package var transactionId: String
        package var originalTransactionId: String

        package init(productId: String, transactionId: String, originalTransactionId: String) {
            self.productId = productId
            self.transactionId = transactionId
            self.originalTransactionId = originalTransactionId
        }
    }

    package static func base64(bundleId: String, receiptType: String? = "Production", records: [Record], indefiniteLengths: Bool = false) throws -> String {
        Data(try bytes(bundleId: bundleId, receiptType: receiptType, records: records, indefiniteLengths: indefiniteLengths)).base64EncodedString()
    }

    package static func bytes(bundleId: String, receiptType: String? = "Production", records: [Record], indefiniteLengths: Bool) throws -> [UInt8] {
        let content = try payload(bundleId: bundleId, receiptType: receiptType, records: records)
        return indefiniteLengths ? try berEnvelope(content) : try derEnvelope(content)
    }

    static let signedData: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 7, 2]
    static let data: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 7, 1]
    static let sha256: ASN1ObjectIdentifier = [2, 16, 840, 1, 101, 3, 4, 2, 1]

    /// The receipt's attribute SET (DER).
    static func payload(bundleId: String, receiptType: String?, records: [Record]) throws -> [UInt8] {
        var attributes: [[UInt8]] = [try attribute(2, text: bundleId)]
        if let receiptType { attributes.append(try attribute(0, text: receiptType)) }
        for record in records {
            let inApp = try set([
                try attribute(1701, integer: 1),
                try attribute(1702, text: record.productId),
                try attribute(1703, text: record.transactionId),
                try attribute(1705, text: record.originalTransactionId),
            ])
            attributes.append(try attribute(17, raw: inApp))
        }
        return try set(attributes)
    }

    static func set(_ members: [[UInt8]]) throws -> [UInt8] {
        var coder = DER.Serializer()
        coder.appendConstructedNode(identifier: .set) { coder in
            for member in members { coder.serializeRawBytes(member) }
        }
        return coder.serializedBytes
    }

    static func attribute(_ type: Int, text: String) throws -> [UInt8] {
        var coder = DER.Serializer()
        try coder.serialize(ASN1UTF8String(text))
        return try attribute(type, raw: coder.serializedBytes)
    }

    static func attribute(_ type: Int, integer: Int) throws -> [UInt8] {
        var coder = DER.Serializer()
        try coder.serialize(integer)
        return try attribute(type, raw: coder.serializedBytes)
    }

    static func attribute(_ type: Int, raw value: [UInt8]) throws -> [UInt8] {
        var coder = DER.Serializer()
        try coder.appendConstructedNode(identifier: .sequence) { coder in
            try coder.serialize(type)
            try coder.serialize(1)
            try coder.serialize(ASN1OctetString(contentBytes: value[...]))
        }
        return coder.serializedBytes
    }

    static func derEnvelope(_ content: [UInt8]) throws -> [UInt8] {
        var coder = DER.Serializer()
        try coder.appendConstructedNode(identifier: .sequence) { coder in
            try coder.serialize(signedData)
            try coder.serialize(explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific) { coder in
                try coder.appendConstructedNode(identifier: .sequence) { coder in
                    try coder.serialize(1)
                    coder.serializeRawBytes(try digestAlgorithms())
                    try coder.appendConstructedNode(identifier: .sequence) { coder in
                        try coder.serialize(data)
                        try coder.serialize(explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific) { coder in
                            try coder.serialize(ASN1OctetString(contentBytes: content[...]))
                        }
                    }
                    coder.appendConstructedNode(identifier: .set) { _ in }
                }
            }
        }
        return coder.serializedBytes
    }

    static func digestAlgorithms() throws -> [UInt8] {
        var coder = DER.Serializer()
        try coder.appendConstructedNode(identifier: .set) { coder in
            try coder.appendConstructedNode(identifier: .sequence) { coder in
                try coder.serialize(sha256)
                try coder.serialize(ASN1Null())
            }
        }
        return coder.serializedBytes
    }

    /// The outer layers in BER's indefinite-length form, as Xcode writes them.
    static func berEnvelope(_ content: [UInt8]) throws -> [UInt8] {
        func indefinite(_ tag: UInt8, _ inner: [UInt8]) -> [UInt8] { [tag, 0x80] + inner + [0, 0] }
        func der(_ body: (inout DER.Serializer) throws -> Void) rethrows -> [UInt8] {
            var coder = DER.Serializer()
            try body(&coder)
            return coder.serializedBytes
        }
        let octets = indefinite(0x24, try der { try $0.serialize(ASN1OctetString(contentBytes: content[...])) })
        let encapsulated = indefinite(0x30, try der { try $0.serialize(data) } + indefinite(0xA0, octets))
        let signed = indefinite(
            0x30, try der { try $0.serialize(1) } + (try digestAlgorithms()) + encapsulated + der { $0.appendConstructedNode(identifier: .set) { _ in } }
        )
        return indefinite(0x30, try der { try $0.serialize(signedData) } + indefinite(0xA0, signed))
    }
}

extension SimulatedAPI {
    /// The app receipt customer `index`'s device would hold: a record of every transaction of the
    /// account (each at its latest version), in the order they happened.
    /// Its receipt type is the world's: "Production", or "ProductionSandbox" in Sandbox.
    package func appReceipt(customer index: Int, indefiniteLengths: Bool = false) throws -> String {
        guard scenario.customers.indices.contains(index) else { throw SimulatorError("no customer \(index)") }
        var latest: [String: TransactionPayload] = [:]
        var order: [String] = []
        let now = Int64(scenario.configuration.now.timeIntervalSince1970 * 1000)
        for version in scenario.customers[index].transactionVersions where version.modified <= now {
            guard let id = version.transaction.transactionId else { continue }
            if latest.updateValue(version.transaction, forKey: id) == nil { order.append(id) }
        }
        let records = order.compactMap { id -> AppReceiptWriter.Record? in
            guard let transaction = latest[id], let original = transaction.originalTransactionId else { return nil }
            return .init(productId: transaction.productId ?? "", transactionId: id, originalTransactionId: original)
        }
        let receiptType = scenario.configuration.environment == .sandbox ? "ProductionSandbox" : "Production"
        return try AppReceiptWriter.base64(
            bundleId: scenario.configuration.bundleId, receiptType: receiptType, records: records, indefiniteLengths: indefiniteLengths)
    }
}

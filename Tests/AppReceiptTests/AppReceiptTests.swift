import AppReceipt
import AppStoreSimulator
import Foundation
import Testing

/// App receipts read for the IDs they name: Apple's own Xcode receipts (BER, indefinite lengths
/// at every level, the content in a constructed OCTET STRING) and the App Store's DER.
@Suite struct AppReceiptTests {
    static func appleReceipt(_ name: String) throws -> String {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("AppleReceipts").appendingPathComponent(name)
        return try String(contentsOf: url, encoding: .utf8)
    }

    @Test func applesXcodeReceiptWithATransactionNamesItsTransactionId() throws {
        let receipt = try AppReceipt(base64: try Self.appleReceipt("xcode-app-receipt-with-transaction"))
        #expect(receipt.bundleId == "com.example.naturelab.backyardbirds.example")
        #expect(receipt.receiptType == "Xcode")
        #expect(receipt.purchases.count == 1)
        #expect(receipt.purchases.first?.transactionId == "0")
        #expect(receipt.purchases.first?.productId == "pass.premium")
        #expect(receipt.transactionIds == ["0"])
    }

    @Test func applesEmptyXcodeReceiptNamesNoTransaction() throws {
        let receipt = try AppReceipt(base64: try Self.appleReceipt("xcode-app-receipt-empty"))
        #expect(receipt.bundleId == "com.example.naturelab.backyardbirds.example")
        #expect(receipt.purchases.isEmpty)
        #expect(receipt.transactionIds.isEmpty)
    }

    @Test func aReceiptWithIndefiniteLengthsNamesWhatItsDEREncodingNames() throws {
        let records = [
            AppReceiptWriter.Record(productId: "monthly", transactionId: "2000000000000001", originalTransactionId: "2000000000000001"),
            AppReceiptWriter.Record(productId: "monthly", transactionId: "2000000000000002", originalTransactionId: "2000000000000001"),
            AppReceiptWriter.Record(productId: "coins", transactionId: "2000000000000003", originalTransactionId: "2000000000000003"),
        ]
        let der = try AppReceiptWriter.bytes(bundleId: "com.example.app", records: records, indefiniteLengths: false)
        let ber = try AppReceiptWriter.bytes(bundleId: "com.example.app", records: records, indefiniteLengths: true)
        #expect(der[1] != 0x80 && ber[1] == 0x80, "the two encodings differ: definite and indefinite lengths")
        let fromDER = try AppReceipt(bytes: der)
        let fromBER = try AppReceipt(bytes: ber)
        #expect(fromDER == fromBER)
        #expect(fromBER.bundleId == "com.example.app")
        #expect(fromBER.receiptType == "Production")
        #expect(fromBER.transactionIds == ["2000000000000001", "2000000000000003", "2000000000000002"])
    }

    @Test func garbledReceiptsAreNamedForWhatIsWrong() throws {
        #expect(throws: AppReceiptError.empty) { try AppReceipt(base64: "  ") }
        #expect(throws: AppReceiptError.notBase64) { try AppReceipt(base64: "not a receipt!") }
        // A SEQUENCE { OID 1.2.840.113549.1.7.1 (data) }: PKCS#7, but not signed data.
        let data = Data([0x30, 0x0B, 0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]).base64EncodedString()
        #expect(throws: AppReceiptError.notSignedData) { try AppReceipt(base64: data) }
        let valid = try AppReceiptWriter.bytes(
            bundleId: "com.example.app", records: [.init(productId: "p", transactionId: "1", originalTransactionId: "1")], indefiniteLengths: false
        )
        let cut = Data(valid.prefix(valid.count - 7)).base64EncodedString()
        #expect(throws: AppReceiptError.self) { try AppReceipt(base64: cut) }
        if case .malformed = try #require(catching(cut)) {} else { Issue.record("a cut receipt is malformed") }
    }

    private func catching(_ text: String) -> AppReceiptError? {
        do {
            _ = try AppReceipt(base64: text)
            return nil
        } catch {
            return error
        }
    }
}

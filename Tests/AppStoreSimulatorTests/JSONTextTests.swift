import Foundation
import Testing

@testable import AppStoreSimulator

/// The hand-written answers must be the JSON `JSONEncoder` writes for the same value.
@Suite("Hand-written JSON answers")
struct JSONTextTests {
    static let awkward = ["plain.base64url-_text", "quote \" backslash \\ slash / tab \t newline \n bell \u{7}", "ünïcödé ✓ 😀", ""]

    static func parsed(_ bytes: [UInt8]) throws -> NSObject {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) as? NSObject)
    }

    static func encoded(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Array(try encoder.encode(value))
    }

    @Test func aHistoryPageIsTheJSONTheEncoderWrites() throws {
        for token in [nil, "next-page"] as [String?] {
            let body = SimulatedAPI.NotificationHistoryResponseBody(
                notificationHistory: Self.awkward.enumerated().map { index, text in
                    .init(signedPayload: text, sendAttempts: (0..<index).map { .init(attemptDate: 1_700_000_000_000 + Int64($0), sendAttemptResult: "TIMED_OUT") })
                },
                hasMore: token != nil, paginationToken: token
            )
            #expect(try Self.parsed(body.jsonText.bytes) == (try Self.parsed(try Self.encoded(body))))
        }
    }

    @Test func aTransactionHistoryPageIsTheJSONTheEncoderWrites() throws {
        let body = SimulatedAPI.HistoryResponseBody(
            revision: "rev", hasMore: true, bundleId: "com.example.app", appAppleId: 1_234_567_890, environment: "Sandbox",
            signedTransactions: Self.awkward
        )
        #expect(try Self.parsed(body.jsonText.bytes) == (try Self.parsed(try Self.encoded(body))))
        let empty = SimulatedAPI.HistoryResponseBody(revision: "", hasMore: false, bundleId: "b", appAppleId: 0, environment: "Production", signedTransactions: [])
        #expect(try Self.parsed(empty.jsonText.bytes) == (try Self.parsed(try Self.encoded(empty))))
    }

    /// The eight-bytes-at-a-time scan finds every byte JSON must escape at every offset of a
    /// word, and passes over every byte that needs none (non-ASCII and the quote's and the
    /// backslash's neighbours included).
    @Test func theWordScanFindsEveryByteToEscapeAtEveryOffsetAndNothingElse() {
        let mustEscape: [UInt8] = [0x22, 0x5C, 0x00, 0x01, 0x0A, 0x1F]
        let mayStay: [UInt8] = [0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F, 0x80, 0xC3, 0xFF, UInt8(ascii: "A")]
        for length in [1, 7, 8, 9, 16, 23, 40] {
            for position in 0..<length {
                for special in mustEscape {
                    for filler in mayStay {
                        var bytes = [UInt8](repeating: filler, count: length)
                        bytes[position] = special
                        let found = bytes.withUnsafeBufferPointer { JSONText.firstByteToEscape(in: $0, from: 0) }
                        #expect(found == position, "length \(length), 0x\(String(special, radix: 16)) at \(position) among 0x\(String(filler, radix: 16))")
                    }
                }
            }
            for filler in mayStay {
                let bytes = [UInt8](repeating: filler, count: length)
                #expect(bytes.withUnsafeBufferPointer { JSONText.firstByteToEscape(in: $0, from: 0) } == length)
            }
        }
        let twoQuotes = Array("abcdefghij\"klmnopqrstuv\"wx".utf8)
        #expect(twoQuotes.withUnsafeBufferPointer { JSONText.firstByteToEscape(in: $0, from: 11) } == 23)
    }
}

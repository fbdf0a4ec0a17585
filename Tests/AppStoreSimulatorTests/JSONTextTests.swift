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
}

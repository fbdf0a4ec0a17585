import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import SignedData
import Testing

/// A bounded, seeded fuzzer for the decoders that read untrusted input: the JWS verifier on
/// mutated payloads, and the API's response decoders on random JSON. Neither may crash; a
/// mutated payload may verify only if it still carries the original's bytes.
@Suite("Fuzzing the decoders")
struct FuzzTests {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/{}\"\\ \u{0}é")

    static func mutate(_ jws: String, _ random: inout SeededGenerator) -> String {
        var characters = Array(jws)
        switch Int.random(in: 0..<7, using: &random) {
        case 0:  // change characters
            for _ in 0..<Int.random(in: 1...4, using: &random) where !characters.isEmpty {
                characters[Int.random(in: 0..<characters.count, using: &random)] = alphabet.randomElement(using: &random)!
            }
        case 1:  // cut short
            characters = Array(characters.prefix(Int.random(in: 0..<max(characters.count, 1), using: &random)))
        case 2:  // insert
            characters.insert(alphabet.randomElement(using: &random)!, at: Int.random(in: 0...characters.count, using: &random))
        case 3:  // swap two parts
            let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
            if parts.count == 3 { characters = Array([parts[1], parts[0], parts[2]].joined(separator: ".")) }
        case 4:  // a part replaced by random base64url
            var parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            let bytes = (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            parts[Int.random(in: 0..<parts.count, using: &random)] = Base64URL.encode(Data(bytes))
            characters = Array(parts.joined(separator: "."))
        case 5:  // duplicated
            characters += characters
        default:  // bytes removed from the middle
            if characters.count > 10 {
                let start = Int.random(in: 0..<(characters.count - 5), using: &random)
                characters.removeSubrange(start..<(start + Int.random(in: 1...5, using: &random)))
            }
        }
        return String(characters)
    }

    /// Whether `mutated` carries `original`'s signing input (header and payload, as text) and a
    /// signature of the same bytes.
    static func signsTheSame(_ mutated: String, _ original: String) -> Bool {
        if mutated == original { return true }
        let parts = mutated.split(separator: ".", omittingEmptySubsequences: false)
        let originals = original.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == originals[0], parts[1] == originals[1], let signature = Base64URL.decode(Array(parts[2].utf8)) else { return false }
        return signature == Base64URL.decode(Array(originals[2].utf8))
    }

    static func randomJSON(_ random: inout SeededGenerator, depth: Int = 0) -> Any {
        switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &random) {
        case 0: return Int64.random(in: Int64.min...Int64.max, using: &random)
        case 1: return String((0..<Int.random(in: 0...12, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
        case 2: return Bool.random(using: &random)
        case 3: return NSNull()
        case 4: return (0..<Int.random(in: 0...4, using: &random)).map { _ in randomJSON(&random, depth: depth + 1) }
        default:
            let keys = ["notificationHistory", "hasMore", "paginationToken", "signedPayload", "sendAttempts", "attemptDate", "sendAttemptResult",
                        "revision", "signedTransactions", "data", "environment", "bundleId", "lastTransactions", "status", "x"]
            var object: [String: Any] = [:]
            for _ in 0..<Int.random(in: 0...5, using: &random) { object[keys.randomElement(using: &random)!] = randomJSON(&random, depth: depth + 1) }
            return object
        }
    }

    @Test func mutatedNotificationsNeverCrashTheVerifierAndVerifyOnlyWithTheOriginalsContent() async throws {
        let fixture = try Fixture()
        let originals = try (0..<20).map { _ in try fixture.signedNotification() }
        let verifier = try fixture.verifier()
        var random = SeededGenerator(seed: 424_242)
        var outcomes: [String: Int] = [:]
        var misjudged: [String] = []
        for _ in 0..<4000 {
            let original = originals.randomElement(using: &random)!
            let mutated = Self.mutate(original, &random)
            let outcome = await verifier.verifyNotification(mutated)
            // Verified if and only if what was signed and the signature are the original's: the
            // same text, or the same header and payload with a signature spelled to the same bytes.
            if (outcome.verifiedPayload != nil) != Self.signsTheSame(mutated, original), misjudged.count < 5 { misjudged.append(String(mutated.prefix(60))) }
            if let verified = outcome.verifiedPayload {
                let originalPayload = try #require(await verifier.verifyNotification(original).verifiedPayload)
                #expect(verified.payload.notificationUUID == originalPayload.payload.notificationUUID, "a mutation verified with other content: \(mutated.prefix(80))")
                outcomes["verified", default: 0] += 1
            } else if let rejection = outcome.rejection {
                outcomes[rejection.reason.rawValue, default: 0] += 1
            } else {
                outcomes["retry later", default: 0] += 1
            }
        }
        #expect(misjudged.isEmpty, "verified without the original's signed content, or refused with it: \(misjudged)")
        #expect((outcomes["bad_signature"] ?? 0) + (outcomes["malformed"] ?? 0) > 3000, "\(outcomes)")
    }

    /// Decoded, encoded and decoded again: the same value (nothing read that is not written back).
    static func roundTrips<Value: Codable & Equatable>(_ value: Value) -> Bool {
        guard let data = try? JSONEncoder().encode(value), let again = try? JSONDecoder().decode(Value.self, from: data) else { return false }
        return again == value
    }

    @Test func randomJSONNeverCrashesTheDecodersAndWhatTheyAcceptRoundTrips() throws {
        var random = SeededGenerator(seed: 77)
        var accepted = 0
        var broken: [String] = []
        for _ in 0..<5000 {
            let value = Self.randomJSON(&random)
            guard let data = try? JSONSerialization.data(withJSONObject: value is [String: Any] || value is [Any] ? value : [value], options: [.fragmentsAllowed]) else { continue }
            _ = try? JSONDecoder().decode(NotificationHistoryResponse.self, from: data)
            _ = try? JSONDecoder().decode(HistoryResponse.self, from: data)
            _ = try? JSONDecoder().decode(StatusResponse.self, from: data)
            if let notification = try? JSONDecoder().decode(NotificationPayload.self, from: data), !Self.roundTrips(notification) {
                broken.append(String(decoding: data.prefix(200), as: UTF8.self))
            }
            if let transaction = try? JSONDecoder().decode(TransactionPayload.self, from: data) {
                accepted += 1
                if !Self.roundTrips(transaction) { broken.append(String(decoding: data.prefix(200), as: UTF8.self)) }
            }
        }
        #expect(broken.isEmpty, "\(broken.prefix(3))")
        #expect(accepted > 0, "the generator reaches the decoders' accepting side")
    }
}

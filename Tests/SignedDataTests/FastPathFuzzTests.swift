import AppStoreSimulator
import Foundation
import Testing

@testable import SignedData

/// Fuzzes the fast JSON path on its own: `SimpleJSONObject` (it reads untrusted bytes through an
/// unsafe buffer) and `PayloadFastDecoding`, on byte-level mutations of real payloads' JSON,
/// each compared with Foundation's parsers. The fast path may decline anything; what it accepts
/// must be what `JSONDecoder` reads, value for value, and decodes to the same payload.
@Suite("Fuzzing the fast JSON path against Foundation")
struct FastPathFuzzTests {
    /// Bytes that matter to JSON's grammar, plus a non-ASCII letter and a control byte.
    static let grammar = Array("{}[]:,\"\\ \n-+.eE0123456789tfnrul".utf8) + [0xC3, 0xA9, 0x00, 0x7F]

    /// Real payloads' JSON, as Apple's encoder writes it: every field set.
    static func seeds() throws -> [[UInt8]] {
        var seeds: [[UInt8]] = []
        for seed in 0..<4 {
            for object in [
                PayloadFastDecodingTests.everyField(of: TransactionPayload(), seed: seed),
                PayloadFastDecodingTests.everyField(of: RenewalInfoPayload(), seed: seed),
                PayloadFastDecodingTests.everyField(of: NotificationPayload(notificationType: .didRenew, notificationUUID: "u"), seed: seed),
            ] {
                seeds.append(Array(try JSONSerialization.data(withJSONObject: object, options: seed.isMultiple(of: 2) ? [.sortedKeys] : [])))
            }
        }
        return seeds
    }

    static func mutate(_ input: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let at = Int.random(in: 0...bytes.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0 where at < bytes.count: bytes[at] = grammar.randomElement(using: &random)!
            case 1: bytes.insert(grammar.randomElement(using: &random)!, at: at)
            case 2 where at < bytes.count: bytes.remove(at: at)
            case 3: bytes = Array(bytes.prefix(at))
            case 4:  // a stretch repeated: keys twice, values doubled
                let end = min(bytes.count, at + Int.random(in: 1...40, using: &random))
                bytes.insert(contentsOf: bytes[at..<end], at: end)
            default:  // a digit run made long: overflow, leading zeros
                bytes.insert(contentsOf: Array(repeating: UInt8(ascii: "9"), count: Int.random(in: 1...25, using: &random)), at: at)
            }
        }
        return bytes
    }

    /// Any JSON value as `JSONDecoder` reads it: the oracle for `SimpleJSONObject`.
    indirect enum Oracle: Decodable, Equatable {
        case string(String)
        case integer(Int64)
        case bool(Bool)
        case null
        case object([String: Oracle])
        case other

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let flag = try? container.decode(Bool.self) {
                self = .bool(flag)
            } else if let number = try? container.decode(Int64.self) {
                self = .integer(number)
            } else if let text = try? container.decode(String.self) {
                self = .string(text)
            } else if let object = try? container.decode([String: Oracle].self) {
                self = .object(object)
            } else {
                self = .other
            }
        }
    }

    /// The fast path's reading as the oracle's; nil when a key repeats (JSON leaves that open:
    /// the payload decoders decline it).
    static func oracle(_ object: SimpleJSONObject) -> Oracle? {
        var fields: [String: Oracle] = [:]
        for (key, value) in object.fields {
            guard fields[key] == nil else { return nil }
            switch value {
            case .string(let text): fields[key] = .string(text)
            case .integer(let number): fields[key] = .integer(number)
            case .negativeZero: fields[key] = .integer(0)
            case .bool(let flag): fields[key] = .bool(flag)
            case .null: fields[key] = .null
            case .object(let nested):
                guard let nested = oracle(nested) else { return nil }
                fields[key] = nested
            }
        }
        return .object(fields)
    }

    /// Fast decode must equal `JSONDecoder`'s result, or decline.
    static func check<Payload: FastDecodable & Equatable>(_ type: Payload.Type, _ bytes: [UInt8], _ mismatches: inout [String]) -> Bool {
        guard let fast = Payload.decodeFast(bytes) else { return false }
        guard let decoded = try? JSONDecoder().decode(Payload.self, from: Data(bytes)) else {
            mismatches.append("\(Payload.self) accepted what JSONDecoder refuses: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
            return true
        }
        if fast != decoded { mismatches.append("\(Payload.self) read differently: \(String(decoding: bytes.prefix(200), as: UTF8.self))") }
        return true
    }

    /// `serve`'s body reader against `JSONSerialization` on Apple's body and its mutations: the
    /// same payload, or nothing, every time; but a body that repeats a key, or a payload holding a
    /// NUL, is refused (issue 67), whatever `JSONSerialization` would make of it.
    @Test func theNotificationBodyReaderAnswersWhatJSONSerializationReadsForEveryMutation() throws {
        func reference(_ body: [UInt8]) -> String? {
            let payload = (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["signedPayload"] as? String
            return payload?.utf8.contains(0) == true ? nil : payload
        }
        func read(_ body: [UInt8]) -> String? { try? NotificationBody.signedPayload(in: body).get() }
        let plain = Array(#"{"signedPayload":"eyJhbGciOiJFUzI1NiJ9.eyJ4IjoxfQ.c2ln"}"#.utf8)
        let handPicked = [
            plain,
            Array(" {\n \"signedPayload\" : \"a.b.c\" } ".utf8),
            Array(#"{"signedPayload":"a\/b.c"}"#.utf8),
            Array(#"{"signedPayload":7}"#.utf8),
            Array(#"{"other":"a.b.c"}"#.utf8),
            Array(#"["a.b.c"]"#.utf8),
            Array(#"{"signedPayload":"a.b.c"} x"#.utf8),
            Array(#"{"signedPayload":"\u0061.b.c"}"#.utf8),
            [],
        ]
        for body in handPicked {
            #expect(read(body) == reference(body), "\(String(decoding: body, as: UTF8.self))")
        }
        #expect(read(plain) == "eyJhbGciOiJFUzI1NiJ9.eyJ4IjoxfQ.c2ln")
        var random = SeededGenerator(seed: 20_261_124)
        var disagreements = 0
        for _ in 0..<20_000 {
            let body = Self.mutate(plain, &random)
            if case .failure(.repeatedKey) = NotificationBody.signedPayload(in: body) { continue }
            // Refused as unreadable: text Foundation reads more leniently (a trailing comma).
            if case .unreadable = RepeatedJSONKey.scan(body), case .failure(.notAnObject) = NotificationBody.signedPayload(in: body) { continue }
            if read(body) != reference(body) { disagreements += 1 }
        }
        #expect(disagreements == 0)
    }

    @Test func whatTheFastPathAcceptsFoundationReadsTheSameAndItNeverCrashes() throws {
        let seeds = try Self.seeds()
        var random = SeededGenerator(seed: 20_261_123)
        var mismatches: [String] = []
        var parsed = 0
        var declined = 0
        var decodedFast = 0
        var readAsFields = 0
        // `-0` is the Double -0.0 to JSONDecoder, equal to 0.0, so the comparisons below cannot
        // see its sign: compared here.
        let negativeZero = Array(#"{"a":-0,"b":0}"#.utf8)
        let fast = try #require(SimpleJSONObject.parse(negativeZero)?.jsonFields)
        let decoded = try JSONDecoder().decode([String: JSONValue].self, from: Data(negativeZero))
        for key in ["a", "b"] {
            guard case .number(let mine)? = fast[key], case .number(let theirs)? = decoded[key] else {
                Issue.record("\(key): not a number")
                continue
            }
            #expect(mine.sign == theirs.sign, "\(key)")
        }
        #expect(decoded["a"].map { if case .number(let zero) = $0 { zero.sign == .minus } else { false } } == true)
        for seed in seeds {
            let fields = try #require(SimpleJSONObject.parse(seed)?.jsonFields, "a real payload's plain shape is read fast")
            #expect(fields == (try JSONDecoder().decode([String: JSONValue].self, from: Data(seed))))
        }
        for round in 0..<30_000 {
            let bytes = Self.mutate(seeds[round % seeds.count], &random)
            guard let object = SimpleJSONObject.parse(bytes) else {
                declined += 1
                continue
            }
            parsed += 1
            // JSONDecoder must read the same object: never accept what it refuses.
            if let fast = Self.oracle(object) {
                if let foundation = try? JSONDecoder().decode(Oracle.self, from: Data(bytes)) {
                    if foundation != fast { mismatches.append("parsed differently: \(String(decoding: bytes.prefix(200), as: UTF8.self))") }
                } else {
                    mismatches.append("parsed what JSONDecoder refuses: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
                }
            }
            // The unverified look (`UnverifiedPayload.fields`) reads the same object into
            // `[String: JSONValue]` as JSONDecoder does, or declines.
            if let fields = object.jsonFields {
                readAsFields += 1
                if (try? JSONDecoder().decode([String: JSONValue].self, from: Data(bytes))) != fields {
                    mismatches.append("read into JSONValue differently: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
                }
            }
            if Self.check(TransactionPayload.self, bytes, &mismatches) { decodedFast += 1 }
            if Self.check(RenewalInfoPayload.self, bytes, &mismatches) { decodedFast += 1 }
            if Self.check(NotificationPayload.self, bytes, &mismatches) { decodedFast += 1 }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) mismatches, first: \(mismatches.prefix(3))")
        // The mutations reach both sides of every decision.
        #expect(
            parsed > 1000 && declined > 1000 && decodedFast > 1000 && readAsFields > 1000,
            "parsed \(parsed), declined \(declined), decoded fast \(decodedFast), read as fields \(readAsFields)")
    }
}

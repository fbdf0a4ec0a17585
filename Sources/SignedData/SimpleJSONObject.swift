/// A JSON object read on a fast path that handles only the plain shape Apple's payloads have:
/// ASCII strings without escapes, integers, booleans, null, and objects nested one level
/// (a notification's `data`). Anything else (an escape, non-ASCII text, an array, a fraction or
/// exponent, deeper nesting, a key given twice, malformed JSON) makes `parse` return nil, and the caller decodes
/// with `JSONDecoder`, which then decides. So the fast path never accepts what `JSONDecoder`
/// would refuse, and never reads a value differently: it only declines.
///
/// Why: `JSONDecoder` cost about 30 µs of the 220 µs a full notification takes to verify
/// (three signatures are about 150 µs), measured with `reconcile-benchmark`'s verification part.
struct SimpleJSONObject: Sendable {
    enum Value: Sendable {
        case string(String)
        case integer(Int64)
        case bool(Bool)
        case null
        /// `-0`: an integer field reads it as 0, a `JSONValue` as the Double -0.0 (as JSONDecoder does).
        case negativeZero
        indirect case object(SimpleJSONObject)
    }

    var fields: [(key: String, value: Value)] = []

    /// The object that is the whole of `bytes` (whitespace around it allowed), or nil when the
    /// text is not of the plain shape (or not JSON).
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> SimpleJSONObject? {
        var reader = Reader(bytes: bytes)
        reader.skipWhitespace()
        guard let object = reader.object(depth: 0) else { return nil }
        reader.skipWhitespace()
        return reader.index == bytes.count ? object : nil
    }

    static func parse(_ bytes: [UInt8]) -> SimpleJSONObject? {
        bytes.withUnsafeBufferPointer { parse($0) }
    }

    private struct Reader {
        /// Keys of one object the fast path reads, at most.
        static let maximumFields = 64
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            guard current == byte else { return false }
            index += 1
            return true
        }

        mutating func object(depth: Int) -> SimpleJSONObject? {
            guard consume(UInt8(ascii: "{")) else { return nil }
            var object = SimpleJSONObject()
            var keyFilter: UInt64 = 0
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return object }
            while true {
                skipWhitespace()
                guard let key = string() else { return nil }
                // More keys than any of Apple's objects has (under 40): declined, so that the
                // comparisons below stay few whatever an attacker sends (the fallback's scan
                // checks keys with a set).
                guard object.fields.count < Self.maximumFields else { return nil }
                // A key given twice: declined, and the fallback refuses it (`RepeatedJSONKey`).
                // A 64-bit filter of the keys' lengths and end bytes keeps the comparison with
                // the earlier keys to the few whose filter bit is already set.
                let utf8 = key.utf8
                let bit: UInt64 = 1 << ((UInt64(utf8.count) &* 31 &+ UInt64(utf8.first ?? 0) &* 7 &+ UInt64(utf8.last ?? 0)) & 63)
                if keyFilter & bit != 0, object.fields.contains(where: { $0.key == key }) { return nil }
                keyFilter |= bit
                skipWhitespace()
                guard consume(UInt8(ascii: ":")) else { return nil }
                skipWhitespace()
                guard let value = value(depth: depth) else { return nil }
                object.fields.append((key, value))
                skipWhitespace()
                if consume(UInt8(ascii: ",")) { continue }
                guard consume(UInt8(ascii: "}")) else { return nil }
                return object
            }
        }

        mutating func value(depth: Int) -> Value? {
            guard let byte = current else { return nil }
            switch byte {
            case UInt8(ascii: "\""): return string().map(Value.string)
            case UInt8(ascii: "{"): return depth < 1 ? object(depth: depth + 1).map(Value.object) : nil
            case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
            case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
            case UInt8(ascii: "n"): return literal("null") ? .null : nil
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard let number = integer() else { return nil }
                return number == 0 && byte == UInt8(ascii: "-") ? .negativeZero : .integer(number)
            default: return nil
            }
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        /// A string of printable ASCII without escapes; nil for anything else.
        mutating func string() -> String? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = index
            index = JSONStringScan.firstSpecialByte(in: bytes, from: index, nonASCIIIsSpecial: true)
            guard current == UInt8(ascii: "\"") else { return nil }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            index += 1
            return text
        }

        /// `-?(0|[1-9][0-9]*)` that fits in Int64; nil for a fraction, an exponent or overflow.
        mutating func integer() -> Int64? {
            let negative = consume(UInt8(ascii: "-"))
            let digitsStart = index
            var magnitude: Int64 = 0
            while let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                let (times10, overflowA) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, overflowB) = times10.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                if overflowA || overflowB { return nil }
                magnitude = sum
                index += 1
            }
            let digits = index - digitsStart
            if digits == 0 || (digits > 1 && bytes[digitsStart] == UInt8(ascii: "0")) { return nil }
            if let byte = current, byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") { return nil }
            return negative ? -magnitude : magnitude
        }
    }
}

extension SimpleJSONObject.Value {
    // For an optional field: .some(nil) for null, .some(value) for the right type, nil for any
    // other type (the caller then declines, and JSONDecoder reports the mismatch).

    var optionalString: String?? {
        switch self {
        case .null: .some(nil)
        case .string(let text): .some(text)
        default: nil
        }
    }

    var optionalInt64: Int64?? {
        switch self {
        case .null: .some(nil)
        case .integer(let number): .some(number)
        case .negativeZero: .some(0)
        default: nil
        }
    }

    var optionalInt: Int?? {
        switch self {
        case .null: .some(nil)
        case .integer(let number): Int(exactly: number).map { .some($0) }
        case .negativeZero: .some(0)
        default: nil
        }
    }

    var optionalBool: Bool?? {
        switch self {
        case .null: .some(nil)
        case .bool(let flag): .some(flag)
        default: nil
        }
    }
}

/// Which fields a fast-path decode has set, so that a key given twice makes it decline (what
/// `JSONDecoder` does with a repeated key is its own business).
struct SeenFields {
    private var bits: UInt64 = 0

    /// True the first time `field` (0..<64) is seen.
    mutating func first(_ field: Int) -> Bool {
        let bit: UInt64 = 1 << UInt64(field)
        defer { bits |= bit }
        return bits & bit == 0
    }
}

/// Finding, eight bytes at a time, the next byte a JSON string needs care with: a quote, a
/// backslash, a control character, and optionally any non-ASCII byte. Signed payloads are
/// kilobytes of base64url in which none occurs.
public enum JSONStringScan {
    /// The index of the first such byte at or after `start`, or `bytes.count`.
    public static func firstSpecialByte(in bytes: UnsafeBufferPointer<UInt8>, from start: Int, nonASCIIIsSpecial: Bool) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        // Whether any byte of `word` is below `limit` (≤ 128): exact as to whether, not which.
        func anyByteBelow(_ limit: UInt8, _ word: UInt64) -> Bool {
            (word &- ones &* UInt64(limit)) & ~word & highBits != 0
        }
        let quotes = ones &* UInt64(UInt8(ascii: "\""))
        let backslashes = ones &* UInt64(UInt8(ascii: "\\"))
        var index = start
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= bytes.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                if (nonASCIIIsSpecial && word & highBits != 0) || anyByteBelow(0x20, word) || anyByteBelow(1, word ^ quotes)
                    || anyByteBelow(1, word ^ backslashes)
                {
                    break
                }
                index += 8
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || (nonASCIIIsSpecial && byte >= 0x80) {
                return index
            }
            index += 1
        }
        return bytes.count
    }
}

extension SimpleJSONObject {
    /// The object as `JSONDecoder` decodes it into `[String: JSONValue]`; nil (decline) when a
    /// key is given twice, which the fast path leaves to `JSONDecoder`. An integer becomes the
    /// `Double` nearest to it, as `JSONDecoder` reads the same digits.
    var jsonFields: [String: JSONValue]? {
        var result: [String: JSONValue] = [:]
        result.reserveCapacity(fields.count)
        for (key, value) in fields {
            guard result[key] == nil, let converted = value.json else { return nil }
            result[key] = converted
        }
        return result
    }
}

extension SimpleJSONObject.Value {
    var json: JSONValue? {
        switch self {
        case .string(let text): .string(text)
        case .integer(let number): .number(Double(number))
        case .negativeZero: .number(-0.0)
        case .bool(let flag): .bool(flag)
        case .null: .null
        case .object(let object): object.jsonFields.map(JSONValue.object)
        }
    }
}

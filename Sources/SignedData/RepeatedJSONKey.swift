/// Finding a key given twice in one JSON object (issue 67). Apple never sends one, and parsers
/// disagree on which of the two counts: `JSONSerialization` kept the last `signedPayload` of a
/// body and `JSONDecoder` the first, so `serve` recorded forged-then-genuine where `ingest`
/// recorded genuine-then-forged, and a body forwarded to a team's own handler could mean one
/// thing there and another here. So a body, a JWS header or a payload that repeats a key is
/// malformed, whichever path reads it.
///
/// Keys are compared as the decoder compares them: unescaped (`"a"` and `"\u0061"` are one key)
/// and as Swift strings (canonically equivalent spellings are one key, as in a `Dictionary`).
/// Only the fallback paths call this; the fast path (`SimpleJSONObject`) declines a repeated key
/// itself, so the common case costs nothing more.
package enum RepeatedJSONKey {
    /// What a scan of a JSON text found.
    package enum Scan: Hashable, Sendable {
        /// Every object's keys are distinct.
        case distinct
        /// The first key given twice in one object, at any depth.
        case repeated(String)
        /// The text is not JSON this scan can read (malformed, a trailing comma, nested past
        /// `maximumDepth`): it is refused, never handed to a decoder that might read more than
        /// the scan did (Foundation's accepts trailing commas, and keeps the last of two keys).
        case unreadable
    }

    /// Scans `bytes` (a leading UTF-8 byte-order mark allowed, as Foundation allows it).
    package static func scan(_ bytes: [UInt8]) -> Scan {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer)
            if buffer.starts(with: [0xEF, 0xBB, 0xBF]) { scanner.index = 3 }
            scanner.skipWhitespace()
            let read = scanner.value(depth: 0)
            if let repeated = scanner.repeated { return .repeated(repeated) }
            scanner.skipWhitespace()
            return read && scanner.index == buffer.count ? .distinct : .unreadable
        }
    }

    /// The first key given twice in one object, at any depth; nil when there is none or the text
    /// cannot be scanned.
    package static func first(in bytes: [UInt8]) -> String? {
        if case .repeated(let key) = scan(bytes) { return key }
        return nil
    }

    /// The key of the first number that no integer field holds (an integer past Int64, or any
    /// number with a fraction or an exponent), at any depth; nil when there is none. Asked only
    /// once a decoder refused the text, to name the field (`JSONDecoder` names none for 10^30).
    package static func keyOfNumberOutOfRange(in bytes: [UInt8]) -> String? {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer)
            scanner.skipWhitespace()
            _ = scanner.value(depth: 0)
            return scanner.numberOutOfRange
        }
    }

    /// `key` for a message: quoted, at most 64 characters, control characters as `?`.
    package static func quoted(_ key: String) -> String {
        let shown = key.unicodeScalars.prefix(64).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) }
        return "\"" + String(shown) + (key.unicodeScalars.count > 64 ? "…" : "") + "\""
    }

    /// Objects and arrays nested deeper than this are unreadable: Foundation's parsers refuse
    /// text nested past 512 levels, and the scan must not recurse without bound on an
    /// attacker's brackets (Apple's payloads nest three).
    static let maximumDepth = 512

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        var repeated: String?
        /// The key of the first number past Int64 (or with a fraction or exponent).
        var numberOutOfRange: String?
        /// The key whose value is being read, if in an object.
        var currentKey: String?

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

        /// One value; false when the text is not JSON there, or a repeated key was found.
        mutating func value(depth: Int) -> Bool {
            guard depth < RepeatedJSONKey.maximumDepth, let byte = current else { return false }
            switch byte {
            case UInt8(ascii: "{"): return object(depth: depth)
            case UInt8(ascii: "["): return array(depth: depth)
            case UInt8(ascii: "\""): return string() != nil
            default:
                // A number or a literal: its bytes up to the next delimiter (the decoder judges them).
                let start = index
                while let next = current, !Self.isDelimiter(next) { index += 1 }
                if numberOutOfRange == nil, byte == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                    let digits = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    if Int64(digits) == nil { numberOutOfRange = currentKey ?? "" }
                }
                return index > start
            }
        }

        static func isDelimiter(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: ":"), UInt8(ascii: "\""),
                UInt8(ascii: "{"), UInt8(ascii: "["), 0x20, 0x0A, 0x0D, 0x09:
                true
            default: false
            }
        }

        mutating func object(depth: Int) -> Bool {
            index += 1  // {
            var keys: Set<String> = []
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return true }
            while true {
                skipWhitespace()
                guard let key = string() else { return false }
                guard keys.insert(key).inserted else {
                    repeated = key
                    return false
                }
                skipWhitespace()
                guard consume(UInt8(ascii: ":")) else { return false }
                skipWhitespace()
                currentKey = key
                guard value(depth: depth + 1) else { return false }
                skipWhitespace()
                if consume(UInt8(ascii: ",")) { continue }
                return consume(UInt8(ascii: "}"))
            }
        }

        mutating func array(depth: Int) -> Bool {
            index += 1  // [
            skipWhitespace()
            if consume(UInt8(ascii: "]")) { return true }
            while true {
                skipWhitespace()
                guard value(depth: depth + 1) else { return false }
                skipWhitespace()
                if consume(UInt8(ascii: ",")) { continue }
                return consume(UInt8(ascii: "]"))
            }
        }

        /// A string, unescaped; nil when it is not a JSON string.
        mutating func string() -> String? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            var scalars = String.UnicodeScalarView()
            var plainStart = index
            func flushPlain(_ scanner: Scanner, to end: Int) {
                scalars.append(contentsOf: String(decoding: UnsafeBufferPointer(rebasing: scanner.bytes[plainStart..<end]), as: UTF8.self).unicodeScalars)
            }
            while true {
                index = JSONStringScan.firstSpecialByte(in: bytes, from: index, nonASCIIIsSpecial: false)
                guard let byte = current, byte >= 0x20 else { return nil }
                if byte == UInt8(ascii: "\"") {
                    flushPlain(self, to: index)
                    index += 1
                    return String(scalars)
                }
                // A backslash.
                flushPlain(self, to: index)
                index += 1
                guard let escaped = current else { return nil }
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    guard let unit = hex4() else { return nil }
                    if (0xD800..<0xDC00).contains(unit), let low = lowSurrogateAhead() {
                        scalars.append(Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!)
                    } else {
                        // A lone surrogate: the decoder's business; kept as a replacement here.
                        scalars.append(Unicode.Scalar(unit) ?? "\u{FFFD}")
                    }
                default: return nil
                }
                plainStart = index
            }
        }

        /// A `\uDC00`…`\uDFFF` escape next, consumed; nil (nothing consumed) otherwise.
        mutating func lowSurrogateAhead() -> UInt32? {
            guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
            let start = index
            index += 2
            guard let low = hex4(), (0xDC00..<0xE000).contains(low) else {
                index = start
                return nil
            }
            return low
        }

        mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: return nil
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }
    }
}

/// JSON written by hand for the simulator's largest answers. A page of history is mostly signed
/// payloads, base64url text that needs no escaping, and `JSONEncoder` escapes strings a
/// character at a time: in the end-to-end benchmark that was 30% of the simulator's CPU (perf),
/// CPU taken from the reconciler it serves on the same two cores. Keys are written in sorted
/// order, as the simulator's `JSONEncoder` (`.sortedKeys`) writes its other answers.
struct JSONText {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    mutating func key(_ name: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// A quoted string: runs that need no escaping are copied whole.
    mutating func string(_ text: String) {
        var text = text
        bytes.append(UInt8(ascii: "\""))
        text.withUTF8 { utf8 in
            var runStart = 0
            while true {
                let index = Self.firstByteToEscape(in: utf8, from: runStart)
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                guard index < utf8.count else { break }
                let byte = utf8[index]
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
                runStart = index + 1
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Where the first byte JSON must escape (a quote, a backslash, a control character) is, at
    /// or after `start`; `utf8.count` if none. Eight bytes at a time: a signed payload is
    /// kilobytes of base64url with nothing to escape, and a byte at a time was 17% of the
    /// simulator's CPU in the end-to-end benchmark (perf).
    static func firstByteToEscape(in utf8: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        /// Whether any byte of `word` is below `limit` (≤ 128); exact as to whether, not which.
        func anyByteBelow(_ limit: UInt8, _ word: UInt64) -> Bool {
            (word &- ones &* UInt64(limit)) & ~word & highBits != 0
        }
        var index = start
        if let base = utf8.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= utf8.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                let quote = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
                let backslash = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
                if anyByteBelow(0x20, word) || anyByteBelow(1, quote) || anyByteBelow(1, backslash) { break }
                index += 8
            }
        }
        while index < utf8.count {
            let byte = utf8[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { return index }
            index += 1
        }
        return utf8.count
    }

    mutating func int(_ value: Int64) {
        raw(String(value))
    }

    mutating func bool(_ value: Bool) {
        raw(value ? "true" : "false")
    }

    /// `[a,b,...]`, each element written by `element`.
    mutating func array<Element>(_ elements: some Sequence<Element>, _ element: (inout JSONText, Element) -> Void) {
        bytes.append(UInt8(ascii: "["))
        var first = true
        for item in elements {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            element(&self, item)
        }
        bytes.append(UInt8(ascii: "]"))
    }
}

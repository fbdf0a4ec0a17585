import SignedData

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
                // Eight bytes at a time: a byte at a time was 17% of the simulator's CPU (perf).
                let index = JSONStringScan.firstSpecialByte(in: utf8, from: runStart, nonASCIIIsSpecial: false)
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

import Foundation

/// Base64url without padding (RFC 7515 §2), the encoding of the three parts of a compact JWS.
/// Deliberately strict: `+`, `/` and `=` are not base64url and make a part malformed.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let decodingTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// Decodes base64url text; nil when it holds a character outside the alphabet or has an
    /// impossible length.
    public static func decode<Text: Collection>(_ text: Text) -> [UInt8]? where Text.Element == UInt8 {
        if let fast = text.withContiguousStorageIfAvailable({ decode(buffer: $0) }) { return fast }
        return Array(text).withUnsafeBufferPointer { decode(buffer: $0) }
    }

    /// Four characters at a time into three bytes, straight into the output's storage.
    private static func decode(buffer: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = buffer.count
        let remainder = count % 4
        if remainder == 1 { return nil }
        let outputCount = count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        var valid = true
        let output = [UInt8](unsafeUninitializedCapacity: outputCount) { output, initialized in
            decodingTable.withUnsafeBufferPointer { table in
                var input = 0
                var written = 0
                while input + 4 <= count {
                    let a = table[Int(buffer[input])], b = table[Int(buffer[input + 1])]
                    let c = table[Int(buffer[input + 2])], d = table[Int(buffer[input + 3])]
                    if (a | b | c | d) & 0x80 != 0 {
                        valid = false
                        break
                    }
                    let bits = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    output[written] = UInt8(truncatingIfNeeded: bits >> 16)
                    output[written + 1] = UInt8(truncatingIfNeeded: bits >> 8)
                    output[written + 2] = UInt8(truncatingIfNeeded: bits)
                    written += 3
                    input += 4
                }
                if valid && remainder > 0 {
                    var bits: UInt32 = 0
                    for offset in 0..<remainder {
                        let value = table[Int(buffer[input + offset])]
                        if value & 0x80 != 0 { valid = false }
                        bits = bits << 6 | UInt32(value & 0x3F)
                    }
                    // Leftover bits must be zero, as an encoder leaves them; otherwise two texts
                    // would decode to the same bytes and a tampered part could pass unnoticed.
                    if remainder == 2 {
                        if bits & 0x0F != 0 { valid = false }
                        output[written] = UInt8(truncatingIfNeeded: bits >> 4)
                        written += 1
                    } else {
                        if bits & 0x03 != 0 { valid = false }
                        output[written] = UInt8(truncatingIfNeeded: bits >> 10)
                        output[written + 1] = UInt8(truncatingIfNeeded: bits >> 2)
                        written += 2
                    }
                }
                initialized = valid ? written : 0
            }
        }
        return valid ? output : nil
    }

    public static func decode(_ text: Substring) -> [UInt8]? { decode(text.utf8) }

    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var output = [UInt8]()
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = (accumulator << 8) | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int((accumulator >> UInt32(bits)) & 0x3F)])
            }
        }
        if bits > 0 { output.append(alphabet[Int((accumulator << UInt32(6 - bits)) & 0x3F)]) }
        return String(decoding: output, as: UTF8.self)
    }
}

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
        let count = text.count
        if count % 4 == 1 { return nil }
        var output = [UInt8]()
        output.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in text {
            let value = decodingTable[Int(character)]
            if value == 0xFF { return nil }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero, as an encoder leaves them; otherwise two texts would
        // decode to the same bytes and a tampered part could pass unnoticed.
        if bits > 0 && accumulator & ((1 << UInt32(bits)) - 1) != 0 { return nil }
        return output
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

import Foundation

/// ECDSA's malleability, as an attacker uses it: for a signature (r, s), (r, n − s) is another
/// signature of the same message that verifies as well. A JWS re-signed so is a distinct string
/// carrying the same header and payload; whoever keeps what was posted must not count it twice.
public enum SignatureMalleation {
    /// The order n of P-256's group, big-endian.
    static let p256Order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    /// The same ES256 JWS with its signature (r, s) re-made as (r, n − s); nil when `jws` is not
    /// three parts with a 64-byte signature.
    public static func malleated(_ jws: String) -> String? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var text = parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let signature = Data(base64Encoded: text), signature.count == 64 else { return nil }
        let s = Array(signature.suffix(32))
        var complement = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for index in (0..<32).reversed() {
            var difference = Int(p256Order[index]) - Int(s[index]) - borrow
            borrow = difference < 0 ? 1 : 0
            if difference < 0 { difference += 256 }
            complement[index] = UInt8(difference)
        }
        let encoded = (Data(signature.prefix(32)) + Data(complement)).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "\(parts[0]).\(parts[1]).\(encoded)"
    }
}

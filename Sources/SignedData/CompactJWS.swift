#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The three dot-separated parts of a compact JWS, as received. Nothing is decoded or trusted
/// here; the parts only have to exist.
struct CompactJWS {
    let text: String
    let header: Substring
    let payload: Substring
    let signature: Substring

    init?(_ text: String) {
        // Searched as bytes in the string's own storage: splitting a 20 KB string by Character
        // walks grapheme clusters, which costs more than verifying the signature.
        let dots = text.utf8.withContiguousStorageIfAvailable { bytes -> (Int, Int)? in
            guard let base = bytes.baseAddress else { return nil }
            guard let first = memchr(base, Int32(UInt8(ascii: ".")), bytes.count) else { return nil }
            let firstOffset = UnsafePointer<UInt8>(first.assumingMemoryBound(to: UInt8.self)) - base
            let restStart = firstOffset + 1
            guard let second = memchr(base + restStart, Int32(UInt8(ascii: ".")), bytes.count - restStart) else { return nil }
            let secondOffset = UnsafePointer<UInt8>(second.assumingMemoryBound(to: UInt8.self)) - base
            let tailStart = secondOffset + 1
            if memchr(base + tailStart, Int32(UInt8(ascii: ".")), bytes.count - tailStart) != nil { return nil }
            return (firstOffset, secondOffset)
        } ?? Self.dotOffsets(Array(text.utf8))
        guard let (first, second) = dots, first > 0, second > first + 1, second < text.utf8.count - 1 else { return nil }
        let utf8 = text.utf8
        let firstIndex = utf8.index(utf8.startIndex, offsetBy: first)
        let secondIndex = utf8.index(utf8.startIndex, offsetBy: second)
        self.text = text
        self.header = text[text.startIndex..<firstIndex]
        self.payload = text[utf8.index(after: firstIndex)..<secondIndex]
        self.signature = text[utf8.index(after: secondIndex)..<text.endIndex]
    }

    private static func dotOffsets(_ bytes: [UInt8]) -> (Int, Int)? {
        let dots = bytes.indices.filter { bytes[$0] == UInt8(ascii: ".") }
        return dots.count == 2 ? (dots[0], dots[1]) : nil
    }

    /// The bytes the signature covers: `header.payload` exactly as sent.
    var signingInput: Substring.UTF8View {
        text[header.startIndex..<payload.endIndex].utf8
    }
}

/// The JOSE header of an Apple signed payload.
struct JWSHeader: Decodable {
    var alg: String?
    /// Standard base64 (not base64url) DER certificates: leaf, intermediate, root.
    var x5c: [String]?
}

import Crypto
import Foundation  // memchr
import SignedData

/// A compact JWS as the ledger stores it (migration 0021): each distinct thing once.
///
/// Every JWS Apple sends carries its three-certificate chain in its header, and a notification's
/// payload carries two more JWS (the transaction and the renewal info), each with the chain
/// again, base64url-encoded a second time. Stored as received, one notification was about 20 KB.
/// Split, it is: the header once per distinct header (`app_store.jws_headers`, keyed by its
/// SHA-256: one row for all of Apple's), the payload's bytes decoded with each nested JWS cut out
/// and stored as an object of its own, and the 64 signature bytes.
///
/// Nothing is interpreted: the payload's bytes are kept as they are, a nested JWS is any run of
/// `"eyJ….….…"` in them (cut out between its quotes, with one 0x00 byte left in its place, which
/// no JSON text holds), and a JWS whose parts would not come back byte for byte (not three
/// base64url parts, a 0x00 in its payload) is kept whole. So `text` (and `app_store.jws_text` in
/// SQL) gives back exactly the text received, and the key, the SHA-256 of that text, proves it.
package struct SignedObject: Hashable, Sendable {
    /// SHA-256 of the whole JWS text as received.
    package var key: [UInt8]
    package var form: Form

    package enum Form: Hashable, Sendable {
        /// The header as received (base64url text) and its SHA-256; the payload decoded, each nested
        /// JWS replaced by one 0x00 byte; the signature decoded; the nested JWS's keys in order.
        case split(header: String, headerKey: [UInt8], payload: [UInt8], signature: [UInt8], nested: [[UInt8]])
        /// Kept as received.
        case whole(String)
    }

    /// The byte that stands in a payload for a nested JWS.
    package static let nestedMark: UInt8 = 0

    /// The objects that store `jws`: its own first, then each nested JWS's (depth first), each
    /// key once.
    package static func objects(storing jws: String) -> [SignedObject] {
        var objects: [SignedObject] = []
        var seen: Set<[UInt8]> = []
        _ = store(Array(jws.utf8), into: &objects, seen: &seen)
        return objects
    }

    /// The key a JWS text is stored under.
    package static func key(of jws: some Collection<UInt8>) -> [UInt8] { Array(SHA256.hash(data: Array(jws))) }

    private static func store(_ jws: [UInt8], into objects: inout [SignedObject], seen: inout Set<[UInt8]>) -> [UInt8] {
        let key = key(of: jws)
        guard seen.insert(key).inserted else { return key }
        let index = objects.count
        objects.append(SignedObject(key: key, form: .whole(String(decoding: jws, as: UTF8.self))))
        guard let parts = Parts(jws), var payload = Base64URL.decode(parts.payload), let signature = Base64URL.decode(parts.signature),
            !holdsNestedMark(payload)
        else { return key }
        var nested: [[UInt8]] = []
        for range in nestedRanges(in: payload).reversed() {
            nested.append(store(Array(payload[range]), into: &objects, seen: &seen))
            payload.replaceSubrange(range, with: [nestedMark])
        }
        let header = String(decoding: parts.header, as: UTF8.self)
        objects[index].form = .split(
            header: header, headerKey: Self.key(of: parts.header), payload: payload, signature: signature, nested: nested.reversed())
        return key
    }

    private static func holdsNestedMark(_ payload: [UInt8]) -> Bool {
        payload.withUnsafeBufferPointer { bytes in bytes.baseAddress.map { memchr($0, Int32(nestedMark), bytes.count) != nil } ?? false }
    }

    /// The JWS text of `key`, from objects by key: what `app_store.jws_text` does in SQL.
    package static func text(of key: [UInt8], in objects: [[UInt8]: SignedObject]) -> String? {
        guard let object = objects[key] else { return nil }
        switch object.form {
        case .whole(let text):
            return text
        case .split(let header, _, let payload, let signature, let nested):
            var body: [UInt8] = []
            body.reserveCapacity(payload.count)
            var next = nested.makeIterator()
            for byte in payload {
                guard byte == nestedMark else {
                    body.append(byte)
                    continue
                }
                guard let inner = next.next().flatMap({ text(of: $0, in: objects) }) else { return nil }
                body.append(contentsOf: inner.utf8)
            }
            return header + "." + Base64URL.encode(body) + "." + Base64URL.encode(signature)
        }
    }

    /// Each `"eyJ….….…"` in a payload's bytes, between its quotes: three non-empty base64url
    /// parts, the first a JSON header's. The same runs as migration 0021's pattern
    /// `"(eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)"`, left to right. (Written over raw
    /// memory, memchr and a table: it runs on every JWS the ledger writes, debug builds included.)
    package static func nestedRanges(in payload: [UInt8]) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        payload.withUnsafeBufferPointer { bytes in
            guard let base = bytes.baseAddress else { return }
            let count = bytes.count
            let quote = UInt8(ascii: "\""), dot = UInt8(ascii: ".")
            var index = 0
            while index + 4 < count {
                guard let found = memchr(base + index, Int32(quote), count - index) else { return }
                let at = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                guard at + 3 < count, base[at + 1] == UInt8(ascii: "e"), base[at + 2] == UInt8(ascii: "y"), base[at + 3] == UInt8(ascii: "J") else {
                    index = at + 1
                    continue
                }
                let start = at + 1
                var end = start
                var dots = 0, firstDot = 0, secondDot = 0
                while end < count {
                    let byte = base[end]
                    if byte == dot {
                        dots += 1
                        if dots == 1 { firstDot = end } else if dots == 2 { secondDot = end }
                    } else if base64URLTable[Int(byte)] == 0 {
                        break
                    }
                    end += 1
                }
                if end < count, base[end] == quote, dots == 2, secondDot > firstDot + 1, end > secondDot + 1 {
                    ranges.append(start..<end)
                    index = end + 1
                } else {
                    index = start
                }
            }
        }
        return ranges
    }

    /// 1 for the base64url alphabet's bytes, 0 for every other.
    private static let base64URLTable: [UInt8] = {
        var table = [UInt8](repeating: 0, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8 { table[Int(byte)] = 1 }
        return table
    }()

    /// A compact JWS's three parts: exactly two dots, a header that is not empty.
    private struct Parts {
        var header: ArraySlice<UInt8>
        var payload: ArraySlice<UInt8>
        var signature: ArraySlice<UInt8>

        init?(_ jws: [UInt8]) {
            let dots: [Int] = jws.withUnsafeBufferPointer { bytes in
                guard let base = bytes.baseAddress else { return [] }
                var found: [Int] = []
                var offset = 0
                while found.count < 3, offset < bytes.count, let dot = memchr(base + offset, Int32(UInt8(ascii: ".")), bytes.count - offset) {
                    let at = base.distance(to: dot.assumingMemoryBound(to: UInt8.self))
                    found.append(at)
                    offset = at + 1
                }
                return found
            }
            guard dots.count == 2, dots[0] > 0 else { return nil }
            header = jws[..<dots[0]]
            payload = jws[(dots[0] + 1)..<dots[1]]
            signature = jws[(dots[1] + 1)...]
        }
    }
}

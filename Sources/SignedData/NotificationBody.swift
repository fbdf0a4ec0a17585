import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The body of Apple's POST to a notification URL, `{"signedPayload": "…"}`: how `serve`, `ingest`
/// and `verify` alike take the JWS out of what they were given, so that one input never means
/// one thing to one command and another to the next (issue 67).
package enum NotificationBody {
    /// Why a body holds no JWS to verify: each is malformed input (`serve` 400, `ingest` and
    /// `verify` 65), never a database's or Apple's failure.
    package enum Refusal: Error, Hashable, Sendable, CustomStringConvertible {
        case notAnObject
        case noSignedPayload
        /// A key given twice (in the body itself; the JWS's own parts are checked by the verifier).
        case repeatedKey(String)
        /// No JWS holds one, and PostgreSQL cannot keep one in text: refused before anything is
        /// recorded (a NUL that reached the database failed as SQLSTATE 22021 and read as an outage).
        case holdsNUL

        package var description: String {
            switch self {
            case .notAnObject: "the input starts with '{' but is not a JSON object"
            case .noSignedPayload:
                "the JSON input has no \"signedPayload\" string (expected Apple's webhook body or a notification history item)"
            case .repeatedKey(let key): "the JSON input gives the key \(RepeatedJSONKey.quoted(key)) more than once"
            case .holdsNUL: "the input holds a NUL character, which no signed payload does"
            }
        }
    }

    /// The `signedPayload` string that `body` holds. The plain shape Apple sends is read on the
    /// fast path (`SimpleJSONObject`); whatever it declines (escapes, arrays, a repeated key,
    /// anything not JSON) is scanned for a repeated key and then read by `JSONSerialization`,
    /// only cheaper than always doing so (it was about 4% of `serve`'s CPU under load).
    package static func signedPayload(in body: [UInt8]) -> Result<String, Refusal> {
        // A raw NUL is no JSON either, but it is named as what it is.
        if body.withUnsafeBytes({ $0.baseAddress.map { memchr($0, 0, body.count) != nil } ?? false }) { return .failure(.holdsNUL) }
        let payload: String
        if let object = SimpleJSONObject.parse(body) {
            guard let field = object.fields.first(where: { $0.key == "signedPayload" }) else { return .failure(.noSignedPayload) }
            guard case .string(let text) = field.value else { return .failure(.noSignedPayload) }
            payload = text
        } else {
            switch RepeatedJSONKey.scan(body) {
            case .repeated(let key): return .failure(.repeatedKey(key))
            case .unreadable: return .failure(.notAnObject)
            case .distinct: break
            }
            guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else { return .failure(.notAnObject) }
            guard let text = object["signedPayload"] as? String else { return .failure(.noSignedPayload) }
            payload = text
        }
        return holdsNUL(payload) ? .failure(.holdsNUL) : .success(payload)
    }

    /// The JWS in what an operator or a handler has at hand: a bare JWS, Apple's webhook body, or
    /// a Get Notification History item (`{"signedPayload": …, "sendAttemptResults": […]}`), with
    /// whitespace around it.
    package static func signedPayload(fromInput input: [UInt8]) -> Result<String, Refusal> {
        var start = input.startIndex
        var end = input.endIndex
        // Whitespace as Foundation trims it for such input, a byte-order mark included.
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 || byte == 0x0B || byte == 0x0C }
        if input.starts(with: [0xEF, 0xBB, 0xBF]) { start += 3 }
        while start < end, isSpace(input[start]) { start += 1 }
        while end > start, isSpace(input[end - 1]) { end -= 1 }
        let trimmed = Array(input[start..<end])
        guard trimmed.first == UInt8(ascii: "{") else {
            guard !trimmed.contains(0) else { return .failure(.holdsNUL) }
            return .success(String(decoding: trimmed, as: UTF8.self))
        }
        return signedPayload(in: trimmed)
    }

    /// Whether `text` holds a NUL character, searched as bytes (memchr): `utf8.contains` walks
    /// the view an index at a time, 4.6% of serve's CPU under load (perf, 256 connections).
    package static func holdsNUL(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in bytes.baseAddress.map { memchr($0, 0, bytes.count) != nil } ?? false }
    }
}

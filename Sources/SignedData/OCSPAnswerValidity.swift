import Foundation
import SwiftASN1

/// How long an OCSP answer holds: the earliest `nextUpdate` of its responses (RFC 6960 §4.2.1),
/// read from the DER the responder sent. swift-certificates checks the answer itself (signature,
/// times, nonce, status); this only reads the one figure the cache needs, and gives nil when the
/// answer names none or cannot be read, in which case the cache's other bounds apply.
enum OCSPAnswerValidity {
    static func nextUpdate(of response: [UInt8]) -> Date? {
        guard let root = try? DER.parse(response),
            let explicit = children(root).first(where: { $0.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) }),
            let responseBytes = children(explicit).first,
            let octets = children(responseBytes).last, case .primitive(let basicBytes) = octets.content,
            let basic = try? DER.parse(Array(basicBytes)),
            let data = children(basic).first,
            let responses = children(data).first(where: { $0.identifier == .sequence })
        else { return nil }
        var earliest: Date?
        for single in children(responses) {
            let parts = children(single)
            // certID, certStatus, thisUpdate, then nextUpdate as [0] EXPLICIT when present.
            guard let thisUpdate = parts.firstIndex(where: { $0.identifier == .generalizedTime }),
                thisUpdate + 1 < parts.count,
                parts[thisUpdate + 1].identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific),
                let timeNode = children(parts[thisUpdate + 1]).first,
                let time = try? GeneralizedTime(derEncoded: timeNode),
                let date = date(time)
            else { continue }
            earliest = min(earliest ?? date, date)
        }
        return earliest
    }

    private static func children(_ node: ASN1Node) -> [ASN1Node] {
        guard case .constructed(let nodes) = node.content else { return [] }
        return Array(nodes)
    }

    private static func date(_ time: GeneralizedTime) -> Date? {
        var parts = DateComponents()
        parts.timeZone = TimeZone(identifier: "UTC")
        parts.year = time.year
        parts.month = time.month
        parts.day = time.day
        parts.hour = time.hours
        parts.minute = time.minutes
        parts.second = time.seconds
        return Calendar(identifier: .gregorian).date(from: parts).map { $0 + time.fractionalSeconds }
    }
}

import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Crypto
import Foundation
import SignedData
import Synchronization

// Get Notification History's request checked as Apple checks it: its filter, its page token,
// and the notifications it matches.

extension SimulatedAPI {
    /// A value the request gave, checked as Apple checks it, or Apple's refusal.
    enum Checked<Value> {
        case checked(Value)
        case refused(Answer)
    }

    /// What a Get Notification History request asks for, checked.
    struct HistoryFilter {
        var start: Int64
        var end: Int64
        var type: NotificationType?
        var subtype: NotificationSubtype?
        var customer: Int?
        var onlyFailures: Bool
    }

    /// The request's dates, type, subtype and transaction, checked as Apple checks them.
    func historyFilter(_ request: HistoryBody, nowMs: Int64) -> Checked<HistoryFilter> {
        guard let start = request.startDate else { return .refused(.error(400, 4_000_015, "Invalid request. The start date is not a timestamp value in milliseconds.")) }
        guard var end = request.endDate else { return .refused(.error(400, 4_000_016, "Invalid request. The end date is not a timestamp value in milliseconds.")) }
        if end > nowMs { end = nowMs }
        guard start < end else { return .refused(.error(400, 4_000_013, "Invalid request. The start date is later than or equal to the end date.")) }
        let retentionDays: Int64 = scenario.configuration.environment == .production ? 180 : 30
        guard start >= nowMs - retentionDays * 86_400_000 else {
            return .refused(.error(400, 4_000_012, "Invalid request. The start date is earlier than the allowed start date."))
        }
        if request.transactionId != nil && (request.notificationType != nil || request.notificationSubtype != nil) {
            return .refused(.error(400, 4_000_019, "Invalid request. Too many constraints applied."))
        }
        var filter = HistoryFilter(start: start, end: end, onlyFailures: request.onlyFailures == true)
        let invalidType = Answer.error(400, 4_000_018, "Invalid request. The notification type or subtype is invalid.")
        if let rawType = request.notificationType {
            let candidate = NotificationType(rawValue: rawType)
            guard Scenario.knownTypes.contains(candidate) else { return .refused(invalidType) }
            filter.type = candidate
        }
        if let rawSubtype = request.notificationSubtype {
            guard let type = filter.type, type.documentedSubtypes.contains(NotificationSubtype(rawValue: rawSubtype)) else { return .refused(invalidType) }
            filter.subtype = NotificationSubtype(rawValue: rawSubtype)
        }
        if let id = request.transactionId ?? request.originalTransactionId {
            guard id.allSatisfy(\.isNumber), !id.isEmpty else { return .refused(.error(400, 4_000_006, "Invalid transaction id.")) }
            guard let found = scenario.customer(forTransactionId: id) else { return .refused(.error(404, 4_040_010, "Transaction id not found.")) }
            filter.customer = found.index
        }
        return .checked(filter)
    }

    /// Where the page a pagination token asks for starts (0 without one); the token must be
    /// this body's, unexpired, and is refused once as expired where the options say so.
    func pageOffset(token tokenText: String?, bodyKey: String, nowMs: Int64) -> Checked<Int> {
        guard let tokenText else { return .checked(0) }
        guard let bytes = Base64URL.decode(Substring(tokenText)), let token = try? JSONDecoder().decode(PageToken.self, from: Data(bytes)),
            token.body == bodyKey, token.offset >= 0
        else {
            return .refused(.error(400, 4_000_014, "Invalid request. The pagination token is invalid."))
        }
        guard Double(nowMs - token.issued) / 1000 <= options.paginationTokenLifetime else {
            return .refused(.error(400, 4_000_017, "Invalid request. The pagination token is expired."))
        }
        if let page = options.expireTokenOnceAtPage, token.offset == page * Self.pageSize,
            state.withLock({ state in defer { state.expiredTokenServed = true }; return !state.expiredTokenServed })
        {
            return .refused(.error(400, 4_000_017, "Invalid request. The pagination token is expired."))
        }
        return .checked(token.offset)
    }

    /// The query's matches, found once per request body and kept: each page is then a slice,
    /// as it is for Apple, instead of a scan of the whole world (a window of a million
    /// notifications would otherwise cost the simulator more than the reconciler). A first page
    /// lists the world as it is now (retries may have delivered some since).
    func historyMatches(_ filter: HistoryFilter, bodyKey: String, offset: Int, retried: [Int: Int64], nowMs: Int64) -> [Int] {
        if offset > 0, let kept = state.withLock({ $0.queryMatches[bodyKey] }) { return kept }
        let (later, answers) = state.withLock { state in
            (state.signedLater, Dictionary(grouping: state.consumptionAnswers, by: \.transactionId).mapValues { $0.map { Int64($0.at.timeIntervalSince1970 * 1000) } })
        }
        let repeated = Set(later.filter { $0.repeatOf != nil }.compactMap(\.transaction.transactionId))
        let originals = Dictionary(later.filter { $0.repeatOf == nil && $0.type == .consumptionRequest }.map { ($0.uuid, $0.signedDate) }, uniquingKeysWith: min)
        let decisions = Self.refundDecisions(of: repeated, in: [scenario.notifications, later])
        let all = scenario.notifications.indices.lazy.map { (index: $0, notification: scenario.notifications[$0]) }
            + later.indices.map { (index: scenario.notifications.count + $0, notification: later[$0]) }
        let matches = all.filter { index, notification in
            guard notification.signedDate >= filter.start, notification.signedDate < filter.end else { return false }
            // Apple repeats a refund request only while it is open: a repeat signed after an
            // answer or a decision of its transaction is not sent.
            if let first = notification.repeatOf.flatMap({ originals[$0] }), let id = notification.transaction.transactionId,
                ((answers[id] ?? []) + (decisions[id] ?? [])).contains(where: { $0 >= first && $0 < notification.signedDate })
            {
                return false
            }
            if let type = filter.type {
                // A type without a subtype matches only notifications that have no subtype.
                guard notification.type == type, notification.subtype == filter.subtype else { return false }
            }
            if let customer = filter.customer, notification.customer != customer { return false }
            if filter.onlyFailures,
                notification.sendAttempts.contains(where: { $0.result == "SUCCESS" && $0.date <= nowMs }) || retried[index].map({ $0 <= nowMs }) == true
            {
                return false
            }
            return true
        }.map(\.index)
        state.withLock { $0.queryMatches[bodyKey] = matches }
        return matches
    }

    /// The signing times of the REFUNDs and REFUND_DECLINEDs of `transactions`.
    static func refundDecisions(of transactions: Set<String>, in lists: [[Scenario.Notification]]) -> [String: [Int64]] {
        guard !transactions.isEmpty else { return [:] }
        var found: [String: [Int64]] = [:]
        for list in lists {
            for notification in list where notification.type == .refund || notification.type == .refundDeclined {
                guard let id = notification.transaction.transactionId, transactions.contains(id) else { continue }
                found[id, default: []].append(notification.signedDate)
            }
        }
        return found
    }
}

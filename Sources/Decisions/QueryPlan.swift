package import Foundation
package import AppStoreServerModel
package import SignedData

/// The Get Notification History queries that recover a window, in order.
///
/// First the notifications with immediate impact: DID_RENEW and EXPIRED, one query per subtype,
/// because a type filter without a subtype matches only notifications without one
/// (`DID_RENEW` alone misses `BILLING_RECOVERY`; `EXPIRED` alone misses `VOLUNTARY`,
/// `BILLING_RETRY`, `PRICE_INCREASE` and `PRODUCT_NOT_FOR_SALE`). Then CONSUMPTION_REQUEST:
/// Apple wants an answer within 12 hours of sending one, so it must not wait behind the rest.
///
/// Then everything else, in one unfiltered pass over the window that skips the (type, subtype)
/// pairs the priority queries already fetched. It re-reads the priority notifications (their
/// pages cost requests), so the whole plan costs Σ⌈nᵢ/20⌉ over the priority pairs plus ⌈N/20⌉
/// for the N notifications of the window. One query per remaining documented pair could cost
/// less when the priority notifications are many, but it cannot see a type or subtype Apple adds
/// after this release (Apple adds some every year: ONE_TIME_CHARGE, METADATA_UPDATE, MIGRATION,
/// PRICE_CHANGE, RESCIND_CONSENT in the last two), and adding a final unfiltered sweep to it would
/// cost more than the unfiltered pass alone: the plan stays complete this way, always.
package struct QueryPlan: Hashable, Sendable {
    package struct Query: Hashable, Sendable, CustomStringConvertible {
        package var type: NotificationType?
        package var subtype: NotificationSubtype?
        /// In the unfiltered pass: the pairs to skip because a priority query brought them.
        package var skipping: Set<TypeAndSubtype>

        /// A stable name for checkpoints: TYPE/SUBTYPE, TYPE/- without a subtype, * unfiltered.
        package var key: String {
            guard let type else { return "*" }
            return "\(type.rawValue)/\(subtype?.rawValue ?? "-")"
        }

        package var description: String {
            guard let type else { return skipping.isEmpty ? "all notifications" : "all other notifications (unfiltered)" }
            return subtype.map { "\(type)/\($0)" } ?? "\(type) (no subtype)"
        }
    }

    package struct TypeAndSubtype: Hashable, Sendable {
        package var type: NotificationType
        package var subtype: NotificationSubtype?
        package init(_ type: NotificationType, _ subtype: NotificationSubtype?) {
            self.type = type
            self.subtype = subtype
        }
    }

    package static let priorityTypes = NotificationTypePolicy.types(\.priorityInPassOne)

    package let window: OutageWindow
    package let onlyFailures: Bool
    /// Only these types (each with every documented subtype), nothing else: the hourly check
    /// for refund requests. Nil: the whole window.
    package let onlyTypes: [NotificationType]?

    package init(window: OutageWindow, onlyFailures: Bool, onlyTypes: [NotificationType]? = nil) {
        self.window = window
        self.onlyFailures = onlyFailures
        self.onlyTypes = onlyTypes
    }

    package var priorityPairs: [TypeAndSubtype] {
        (onlyTypes ?? Self.priorityTypes).flatMap { type in type.documentedSubtypes.map { TypeAndSubtype(type, $0) } }
    }

    /// Every query, in order: the priority queries, then the unfiltered remainder (none when the
    /// plan is for some types only).
    package var queries: [Query] { priorityQueries + (onlyTypes == nil ? [remainderQuery] : []) }

    package var priorityQueries: [Query] {
        priorityPairs.map { Query(type: $0.type, subtype: $0.subtype, skipping: []) }
    }

    /// The rest of the window: one unfiltered query that skips what the priority queries fetched.
    package var remainderQuery: Query { Query(type: nil, subtype: nil, skipping: Set(priorityPairs)) }

    /// The request body of a query; the same body goes with every page. `start`: the window's
    /// start once Apple's limit has overtaken it (`OutageWindow.movedPastRetention`).
    package func request(for query: Query, start: Date? = nil) -> NotificationHistoryRequest {
        NotificationHistoryRequest(
            startDate: start.map { max(window.startMilliseconds, OutageWindow.milliseconds($0)) } ?? window.startMilliseconds,
            endDate: window.endMilliseconds, notificationType: query.type,
            notificationSubtype: query.subtype, onlyFailures: onlyFailures ? true : nil
        )
    }
}

import AppStoreServerAPI
import SignedData

/// The Get Notification History queries that recover a window, in order.
///
/// First the notifications with immediate impact: DID_RENEW and EXPIRED, one query per subtype,
/// because a type filter without a subtype matches only notifications without one
/// (`DID_RENEW` alone misses `BILLING_RECOVERY`; `EXPIRED` alone misses `VOLUNTARY`,
/// `BILLING_RETRY`, `PRICE_INCREASE` and `PRODUCT_NOT_FOR_SALE`).
///
/// Then everything else, once. Two ways were weighed:
/// - one unfiltered pass over the window, skipping the (type, subtype) pairs the priority queries
///   already fetched: it re-reads the priority notifications (their pages cost requests) but needs
///   no more than ⌈N/20⌉ requests for N notifications, and it sees every type, including ones
///   Apple adds after this tool was built;
/// - one query per remaining documented (type, subtype): it never re-reads the priority
///   notifications, but pays at least one request per pair (about 35), even for empty ones, and
///   cannot see a type it does not know.
/// The unfiltered pass is cheaper unless the priority queries brought more than 20 × (number of
/// remaining pairs) notifications, and only it is complete; `remainderStrategy(afterPriority:)`
/// picks per-type only in that case and says so in the report.
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

    package enum RemainderStrategy: String, Hashable, Sendable, Codable {
        case unfiltered
        case perType = "per-type"
    }

    package static let priorityTypes: [NotificationType] = [.didRenew, .expired]

    package let window: OutageWindow
    package let onlyFailures: Bool

    package init(window: OutageWindow, onlyFailures: Bool) {
        self.window = window
        self.onlyFailures = onlyFailures
    }

    package var priorityPairs: [TypeAndSubtype] {
        Self.priorityTypes.flatMap { type in type.documentedSubtypes.map { TypeAndSubtype(type, $0) } }
    }

    package var priorityQueries: [Query] {
        priorityPairs.map { Query(type: $0.type, subtype: $0.subtype, skipping: []) }
    }

    /// Every documented pair other than the priority ones.
    package var remainingPairs: [TypeAndSubtype] {
        NotificationType.documented.filter { !Self.priorityTypes.contains($0) }
            .flatMap { type in type.documentedSubtypes.map { TypeAndSubtype(type, $0) } }
    }

    /// The cheaper complete way to fetch the rest, given how many notifications the priority
    /// queries found (see the type's documentation).
    package func remainderStrategy(afterPriority priorityCount: Int) -> RemainderStrategy {
        priorityCount > 20 * remainingPairs.count ? .perType : .unfiltered
    }

    package func remainderQueries(_ strategy: RemainderStrategy) -> [Query] {
        switch strategy {
        case .unfiltered: [Query(type: nil, subtype: nil, skipping: Set(priorityPairs))]
        case .perType: remainingPairs.map { Query(type: $0.type, subtype: $0.subtype, skipping: []) }
        }
    }

    /// The request body of a query; the same body goes with every page.
    package func request(for query: Query) -> NotificationHistoryRequest {
        NotificationHistoryRequest(
            startDate: window.startMilliseconds, endDate: window.endMilliseconds, notificationType: query.type,
            notificationSubtype: query.subtype, onlyFailures: onlyFailures ? true : nil
        )
    }
}

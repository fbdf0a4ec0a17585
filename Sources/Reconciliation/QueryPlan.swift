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
public struct QueryPlan: Hashable, Sendable {
    public struct Query: Hashable, Sendable, CustomStringConvertible {
        public var type: NotificationType?
        public var subtype: NotificationSubtype?
        /// In the unfiltered pass: the pairs to skip because a priority query brought them.
        public var skipping: Set<TypeAndSubtype>

        /// A stable name for checkpoints: TYPE/SUBTYPE, TYPE/- without a subtype, * unfiltered.
        public var key: String {
            guard let type else { return "*" }
            return "\(type.rawValue)/\(subtype?.rawValue ?? "-")"
        }

        public var description: String {
            guard let type else { return skipping.isEmpty ? "all notifications" : "all other notifications (unfiltered)" }
            return subtype.map { "\(type)/\($0)" } ?? "\(type) (no subtype)"
        }
    }

    public struct TypeAndSubtype: Hashable, Sendable {
        public var type: NotificationType
        public var subtype: NotificationSubtype?
        public init(_ type: NotificationType, _ subtype: NotificationSubtype?) {
            self.type = type
            self.subtype = subtype
        }
    }

    public enum RemainderStrategy: String, Hashable, Sendable, Codable {
        case unfiltered
        case perType = "per-type"
    }

    public static let priorityTypes: [NotificationType] = [.didRenew, .expired]

    public let window: OutageWindow
    public let onlyFailures: Bool

    public init(window: OutageWindow, onlyFailures: Bool) {
        self.window = window
        self.onlyFailures = onlyFailures
    }

    public var priorityPairs: [TypeAndSubtype] {
        Self.priorityTypes.flatMap { type in type.documentedSubtypes.map { TypeAndSubtype(type, $0) } }
    }

    public var priorityQueries: [Query] {
        priorityPairs.map { Query(type: $0.type, subtype: $0.subtype, skipping: []) }
    }

    /// Every documented pair other than the priority ones.
    public var remainingPairs: [TypeAndSubtype] {
        NotificationType.documented.filter { !Self.priorityTypes.contains($0) }
            .flatMap { type in type.documentedSubtypes.map { TypeAndSubtype(type, $0) } }
    }

    /// The cheaper complete way to fetch the rest, given how many notifications the priority
    /// queries found (see the type's documentation).
    public func remainderStrategy(afterPriority priorityCount: Int) -> RemainderStrategy {
        priorityCount > 20 * remainingPairs.count ? .perType : .unfiltered
    }

    public func remainderQueries(_ strategy: RemainderStrategy) -> [Query] {
        switch strategy {
        case .unfiltered: [Query(type: nil, subtype: nil, skipping: Set(priorityPairs))]
        case .perType: remainingPairs.map { Query(type: $0.type, subtype: $0.subtype, skipping: []) }
        }
    }

    /// The request body of a query; the same body goes with every page.
    public func request(for query: Query) -> NotificationHistoryRequest {
        NotificationHistoryRequest(
            startDate: window.startMilliseconds, endDate: window.endMilliseconds, notificationType: query.type,
            notificationSubtype: query.subtype, onlyFailures: onlyFailures ? true : nil
        )
    }
}

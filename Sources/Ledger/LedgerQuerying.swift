import Foundation
import Logging
import PostgresNIO

/// Where a read runs: the pool (each query leases a connection) or one connection already
/// leased, so that several reads cost one lease.
protocol LedgerQuerying: Sendable {
    func ledgerQuery(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence
}

extension PostgresClient: LedgerQuerying {
    func ledgerQuery(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await self.query(query, logger: logger)
    }
}

extension PostgresConnection: LedgerQuerying {
    func ledgerQuery(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await self.query(query, logger: logger)
    }
}

/// What the ledger holds for one page of notifications.
public struct PageLedgerState: Sendable {
    public var existingNotifications: Set<UUID>
    public var subscriptions: [String: SubscriptionRecord]
    public var transactionSignedDates: [String: Date]
}

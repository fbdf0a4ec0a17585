package import Foundation
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
package struct PageLedgerState: Sendable {
    package var existingNotifications: Set<UUID>
    package var subscriptions: [String: SubscriptionRecord]
    package var transactionSignedDates: [String: Date]
}

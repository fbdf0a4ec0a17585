package import Foundation
import Ledger
import Logging
import PostgresNIO
package import RevenueMetrics

extension LedgerStore {
    /// Writes the configuration's product durations (app_store.product_durations) so that
    /// app_store.subscription_periods, and a team's own queries over it, see them; a product
    /// the configuration no longer names is left to its derived duration.
    package func configureProductDurations(_ durations: [String: ProductDuration]) async throws {
        let ids = durations.keys.sorted()
        let texts = ids.map { durations[$0]!.description }
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query(
                "DELETE FROM app_store.product_durations WHERE NOT (product_id = ANY(\(ids)::text[]))", logger: logger)
            try await connection.query(
                """
                INSERT INTO app_store.product_durations (product_id, duration)
                SELECT * FROM unnest(\(ids)::text[], \(texts)::text[])
                ON CONFLICT (product_id) DO UPDATE SET duration = excluded.duration, configured_at = now()
                WHERE app_store.product_durations.duration IS DISTINCT FROM excluded.duration
                """,
                logger: logger
            )
        }
    }

    /// app_store.metrics from `from` to `to`: one row per App Store, interval and currency.
    /// `knownAt`: the ledger as it was then, rebuilt from the change feed (nil: as it is now).
    /// `pricePoints`: Apple's proceeds for the prices they match, loaded into
    /// app_store.price_points for this query alone (one transaction: inserted, used, deleted).
    package func revenueMetrics(
        from: Date, to: Date, choices: MetricsChoices, asOf: Date, knownAt: Date? = nil, pricePoints: PricePoints? = nil
    ) async throws -> [MetricsRow] {
        guard let pricePoints else {
            return try await client.withConnection { connection in
                try await Self.revenueMetrics(on: connection, logger: logger, from: from, to: to, choices: choices, asOf: asOf, knownAt: knownAt, set: nil)
            }
        }
        let set = UUID()
        return try await client.withTransaction(logger: logger) { connection in
            let points = pricePoints.points
            for start in stride(from: 0, to: points.count, by: 10_000) {
                let batch = points[start..<min(start + 10_000, points.count)]
                try await connection.query(
                    """
                    INSERT INTO app_store.price_points (price_set, product_id, territory, customer_price_milliunits, proceeds_milliunits, proceeds_year2_milliunits)
                    SELECT \(set), * FROM unnest(\(batch.map(\.productId))::text[], \(batch.map(\.territory))::text[],
                        \(batch.map(\.customerPrice))::bigint[], \(batch.map(\.proceeds))::bigint[], \(batch.map(\.proceedsYear2))::bigint[])
                    """,
                    logger: logger
                )
            }
            let rows = try await Self.revenueMetrics(on: connection, logger: logger, from: from, to: to, choices: choices, asOf: asOf, knownAt: knownAt, set: set)
            try await connection.query("DELETE FROM app_store.price_points WHERE price_set = \(set)", logger: logger)
            return rows
        }
    }

    static func revenueMetrics(
        on connection: PostgresConnection, logger: Logger, from: Date, to: Date, choices: MetricsChoices, asOf: Date, knownAt: Date?, set: UUID?
    ) async throws -> [MetricsRow] {
        let rows = try await connection.query(
            """
            SELECT bundle_id, environment, interval_start, interval_end, currency,
                active_subscriptions, active_trials, round(mrr_milliunits)::bigint, new_subscriptions, trial_starts,
                trial_conversions, trials_ended, trials_ended_converted, churned, churned_voluntary, churned_billing,
                churned_refund, reactivations, gross_milliunits::bigint, refund_count, refund_milliunits::bigint,
                estimated_proceeds_milliunits::bigint, active_unnormalised, proceeds_estimated
            FROM app_store.metrics(\(from), \(to), \(choices.interval.rawValue), \(choices.convention.rawValue),
                \(choices.refunds.rawValue), \(choices.smallBusinessProgram), \(asOf), \(choices.gracePeriod == .active), \(knownAt), \(set))
            """,
            logger: logger
        )
        var found: [MetricsRow] = []
        for try await row in rows {
            let cells = row.makeRandomAccess()
            var metrics = MetricsRow(
                bundleId: try cells[0].decode(String?.self) ?? "",
                environment: try cells[1].decode(String?.self) ?? "",
                intervalStart: try cells[2].decode(Date.self),
                intervalEnd: try cells[3].decode(Date.self),
                currency: try cells[4].decode(String?.self) ?? ""
            )
            func count(_ index: Int) throws -> Int64 { try cells[index].decode(Int64.self) }
            metrics.activeSubscriptions = try count(5)
            metrics.activeTrials = try count(6)
            metrics.mrr = try count(7)
            metrics.newSubscriptions = try count(8)
            metrics.trialStarts = try count(9)
            metrics.trialConversions = try count(10)
            metrics.trialsEnded = try count(11)
            metrics.trialsEndedConverted = try count(12)
            metrics.churned = try count(13)
            metrics.churnedVoluntary = try count(14)
            metrics.churnedBilling = try count(15)
            metrics.churnedRefund = try count(16)
            metrics.reactivations = try count(17)
            metrics.gross = try count(18)
            metrics.refundCount = try count(19)
            metrics.refundAmount = try count(20)
            metrics.estimatedProceeds = try count(21)
            metrics.activeUnnormalised = try count(22)
            metrics.proceedsEstimated = try count(23)
            found.append(metrics)
        }
        return found
    }

    /// When the change feed's oldest change was recorded (nil: the feed is empty): the earliest
    /// time the ledger's past state can be rebuilt from.
    package func firstChangeRecorded() async throws -> Date? {
        let rows = try await client.query("SELECT min(changed_at) FROM app_store.changes", logger: logger)
        for try await first in rows.decode(Date?.self) { return first }
        return nil
    }

    /// The products whose periods app_store.subscription_periods cannot normalise (no configured
    /// duration, none derivable), with how many periods each has.
    package func unnormalisedProducts() async throws -> [UnnormalisedProduct] {
        let rows = try await client.query(
            """
            SELECT bundle_id, environment, product_id, count(*)
            FROM app_store.subscription_periods
            WHERE period_days IS NULL AND NOT is_trial AND NOT family_shared
            GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
            """,
            logger: logger
        )
        var found: [UnnormalisedProduct] = []
        for try await (bundle, environment, product, periods) in rows.decode((String?, String?, String?, Int64).self) {
            found.append(UnnormalisedProduct(bundleId: bundle ?? "", environment: environment ?? "", productId: product ?? "", periods: periods))
        }
        return found
    }
}

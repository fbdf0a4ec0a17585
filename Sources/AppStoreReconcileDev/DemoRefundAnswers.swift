import AppStoreSimulator
import Foundation
import Logging
import PostgresNIO
import SignedData

/// The demo's refund requests: customers asked for refunds while the servers were down (Apple
/// asked each app for consumption information; Apple asks again about 8 hours later while a request is open), the runs
/// recorded the requests, and `consumption-requests --answer` answers them from a table of usage
/// the demo makes up, as a team would keep one.
enum DemoRefundAnswers {
    /// The facts query the demo's configuration names: the team's table mapped to the contract's columns.
    static let query = """
        -- Facts for Apple's refund requests (appstore-reconcile consumption-requests --answer).
        -- $1 transaction_id, $2 original_transaction_id, $3 app_account_token, $4 product_id, $5 bundle_id, $6 environment
        SELECT u.terms_accepted AS customer_consented,
            CASE WHEN u.delivered THEN 'DELIVERED' ELSE 'UNDELIVERED_SERVER_OUTAGE' END AS delivery_status,
            u.trial_offered AS sample_content_provided,
            CASE WHEN t.product_type = 'Auto-Renewable Subscription' THEN NULL
                 WHEN NOT u.delivered THEN 0
                 ELSE u.used_percent * 1000 END AS consumption_percentage,
            u.team_preference AS refund_preference
        FROM demo_team.purchase_usage u
        LEFT JOIN app_store.transactions t ON t.bundle_id = $5 AND t.environment = $6 AND t.transaction_id = u.transaction_id
        WHERE u.transaction_id = $1
        """

    /// One planted request, and the facts the team holds about it (nil: none).
    struct Planted {
        var transactionId: String
        var facts: (consented: Bool, delivered: Bool, trial: Bool, usedPercent: Int?, preference: String?)?
    }

    /// In each app's Production, refund requests during the outage on `count` purchases (none
    /// shared through Family Sharing), each to be asked again 8 hours later (Apple's pace): none reached the server.
    static func plant(in world: SimulatedDeployment, count: Int = 4) throws -> [Planted] {
        var planted: [Planted] = []
        for api in world.worlds where api.scenario.configuration.environment == .production {
            guard let outage = api.scenario.configuration.outage else { continue }
            let purchases = api.scenario.customers.compactMap { customer in
                customer.purchases.last { $0.latestTransaction.inAppOwnershipType != "FAMILY_SHARED" && $0.latestTransaction.revocationDate == nil }?.latestTransaction
            }.filter { $0.transactionId != nil }
            for (number, transaction) in purchases.suffix(count).enumerated() {
                let id = transaction.transactionId!
                try api.requestRefund(transactionId: id, at: outage.lowerBound.addingTimeInterval(Double(number + 1) * 3600), repeats: 1)
                let oneTime = transaction.type != .autoRenewable
                // Most customers agreed to share their usage; one did not; one purchase the team knows nothing of.
                let facts: [(consented: Bool, delivered: Bool, trial: Bool, usedPercent: Int?, preference: String?)?] = [
                    (true, true, false, oneTime ? 85 : nil, "DECLINE"), (true, true, true, oneTime ? 5 : nil, "GRANT_FULL"), (false, true, false, nil, nil), nil,
                ]
                planted.append(Planted(transactionId: id, facts: facts[number % facts.count]))
            }
        }
        return planted
    }

    /// The team's table, filled for the planted requests.
    static func fillTable(_ planted: [Planted], database: PostgresClient, logger: Logger) async throws {
        // The made-up team's table of facts, in its own schema of the ledger's database.
        try await database.query("CREATE SCHEMA IF NOT EXISTS demo_team", logger: logger)
        try await database.query(
            """
            CREATE TABLE IF NOT EXISTS demo_team.purchase_usage (
                transaction_id  text PRIMARY KEY,
                terms_accepted  boolean NOT NULL,  -- the customer agreed to share usage data with Apple
                delivered       boolean NOT NULL,
                trial_offered   boolean NOT NULL,
                used_percent    integer,           -- how much of a one-time purchase was used
                team_preference text               -- what support would prefer: DECLINE, GRANT_FULL, GRANT_PRORATED
            )
            """,
            logger: logger
        )
        for request in planted {
            guard let facts = request.facts else { continue }
            try await database.query(
                """
                INSERT INTO demo_team.purchase_usage VALUES (\(request.transactionId), \(facts.consented), \(facts.delivered), \(facts.trial),
                    \(facts.usedPercent.map(Int32.init)), \(facts.preference))
                ON CONFLICT (transaction_id) DO NOTHING
                """,
                logger: logger
            )
        }
    }

    /// What the answers came to: requests answered, Send Consumption Information requests per
    /// answer, and the time from each request's recording (and from Apple's first send) to its answer.
    static func figures(_ world: SimulatedDeployment, database: PostgresClient, logger: Logger) async throws -> [String] {
        let rows = try await database.query(
            """
            SELECT a.outcome, count(*)::int8,
                coalesce(max(extract(epoch FROM a.answered_at - r.recorded)), 0)::float8,
                coalesce(max(extract(epoch FROM a.answered_at - r.sent)), 0)::float8
            FROM app_store.consumption_answers a
            JOIN LATERAL (
                SELECT min(c.recorded_at) AS recorded, min(c.sent_date) AS sent FROM app_store.consumption_requests c
                WHERE c.bundle_id = a.bundle_id AND c.environment = a.environment AND c.transaction_id = a.transaction_id
            ) r ON true
            GROUP BY a.outcome ORDER BY a.outcome
            """,
            logger: logger
        )
        var lines: [String] = []
        var sent = 0
        for try await (outcome, count, fromRecording, fromApple) in rows.decode((String, Int64, Double, Double).self) {
            if outcome == "sent" { sent = Int(count) }
            lines.append(
                "  \(outcome): \(count)" + (outcome == "sent" ? String(format: " (at most %.1f s after the run recorded the request, %.1f h after Apple first sent it)", fromRecording, fromApple / 3600) : "")
            )
        }
        let puts = world.worlds.reduce(0) { $0 + ($1.requestCounts["sendConsumptionInformation"] ?? 0) }
        lines.append("  Send Consumption Information requests: \(puts) for \(sent) answers sent" + (sent > 0 ? String(format: " (%.2f per answer)", Double(puts) / Double(sent)) : ""))
        return lines
    }
}

extension DemoRefundAnswers {
    /// The step after the runs: the team's table, then `consumption-requests --answer` twice (the
    /// second sends nothing), then the figures.
    static func answer(
        _ planted: [Planted], world: SimulatedDeployment, config: String, reportDir: String, databaseURL: String, database: PostgresClient, logger: Logger
    ) async throws {
        try await fillTable(planted, database: database, logger: logger)
        print(
            "\nRefund requests: during the outage \(planted.count) customers asked Apple for refunds (Apple asks again about every 8 hours while a request is open); "
                + "the run recorded them, each due within 12 hours. The team keeps usage in demo_team.purchase_usage; the configuration's "
                + "refundRequests.facts query maps it to Apple's fields."
        )
        for (name, title) in [("answers", "Answer them"), ("answers-again", "A second check, which must send nothing")] {
            let arguments = [
                "consumption-requests", "--config", config, "--answer", "--first-lookback-hours", "12", "--settle-minutes", "0", "--report-dir", "\(reportDir)/\(name)",
                "--no-progress",
            ]
            print("\n\(title):\n  $ appstore-reconcile \(arguments.joined(separator: " "))")
            let status = try await DemoDeployment.runTool(arguments, databaseURL: databaseURL)
            guard status == 0 else { throw DemoFailure("appstore-reconcile consumption-requests --answer exited \(status)") }
        }
        print("\napp_store.consumption_answers, a row per request each check looked at, by outcome:")
        try await figures(world, database: database, logger: logger).forEach { print($0) }
    }
}

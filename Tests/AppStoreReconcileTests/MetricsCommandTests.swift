import AppStoreSimulator
import Foundation
import Ledger
import LedgerSupport
import PostgresNIO
import RevenueMetrics
import TestSupport
import Testing
import ThrowawayPostgres

@Suite("metrics on the command line")
struct MetricsCommandTests {
    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    static let configuration = """
        products:
          com.example.simulated.monthly: P1M
          com.example.simulated.annual: P1Y
          com.example.simulated.addon.monthly: P1M
          com.example.simulated.family.monthly: P1M
        smallBusinessProgram: true
        apps:
          - bundleId: com.example.simulated
            issuerId: 57246542-96fe-1a63-e053-0824d011072a
            keyId: SIMKEY0001
            privateKey: /nonexistent/key.p8
            environments: [Sandbox]

        """

    /// The files, the configuration's products, the figures the database gives, the page in a
    /// browser, and each bad input's exit status.
    @Test func metricsWritesItsFilesFromTheLedgerAndRefusesBadInputWithTheDocumentedStatus() async throws {
        let harness = try RecoveryHarness(customers: 60, seed: 67)
        let now = harness.scenario.configuration.now
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let to = calendar.date(byAdding: .day, value: 1, to: calendar.startOfDay(for: now))!
        let from = calendar.date(byAdding: .day, value: -9, to: to)!
        let range = ["--from", from.formatted(.iso8601), "--to", to.formatted(.iso8601)]
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let database = ["DATABASE_URL": environment["DATABASE_URL"]!]
            // Sandbox's one-day "months" give no duration: listed, not guessed.
            let bare = try await BuiltBinary.run(["metrics"] + range + ["--report-dir", scratch.appendingPathComponent("bare").path], environment: database)
            #expect(bare.exitCode == 0, "\(bare.combined)")
            #expect(bare.standardOutput.contains("Not in MRR: com.example.simulated.monthly"), "\(bare.standardOutput)")
            #expect(bare.standardOutput.contains("not accounting"))

            let config = scratch.appendingPathComponent("config.yaml").path
            try Self.configuration.write(toFile: config, atomically: true, encoding: .utf8)
            let directory = scratch.appendingPathComponent("metrics").path
            let run = try await BuiltBinary.run(["metrics", "--config", config, "--json", "--report-dir", directory] + range, environment: database)
            #expect(run.exitCode == 0, "\(run.combined)")
            let printed = try Self.json(run.standardOutput)
            let written = try Self.json(try String(contentsOfFile: directory + "/metrics.json", encoding: .utf8))
            #expect(NSDictionary(dictionary: printed) == NSDictionary(dictionary: written), "--json prints metrics.json")
            #expect((printed["unnormalised"] as? [Any])?.isEmpty == true)
            #expect((printed["choices"] as? [String: Any])?["small_business_program"] as? Bool == true)
            let rows = try #require(printed["rows"] as? [[String: Any]])
            #expect(rows.count == 9, "one row a day: \(rows.count)")
            #expect(rows.allSatisfy { $0["bundle_id"] as? String == "com.example.simulated" && $0["environment"] as? String == "Sandbox" && $0["currency"] as? String == "USD" })

            // The rows are the database's: the same function, read directly.
            let store = LedgerStore(client: client, logger: harness.logger)
            let direct = try await store.revenueMetrics(from: from, to: to, choices: MetricsChoices(smallBusinessProgram: true), asOf: Date())
            #expect(rows.map { $0["active_subscriptions"] as? Int } == direct.map { Int($0.activeSubscriptions) })
            #expect(rows.map { ($0["mrr"] as? Double).map { Int(($0 * 1000).rounded()) } } == direct.map { Int($0.mrr) })
            #expect(rows.map { $0["gross"] as? Double } == direct.map { Double($0.gross) / 1000 })
            #expect(direct.contains { $0.mrr > 0 } && direct.contains { $0.activeTrials > 0 })
            for file in ["metrics.json", "metrics.csv", "report.html"] {
                let mode = (try FileManager.default.attributesOfItem(atPath: directory + "/" + file)[.posixPermissions] as? Int) ?? 0
                #expect(mode & 0o077 == 0, "\(file) is readable by its owner only: \(String(mode, radix: 8))")
            }
            let csv = try String(contentsOfFile: directory + "/metrics.csv", encoding: .utf8).split(separator: "\n")
            #expect(csv.count == 10 && csv[0].hasPrefix("bundle_id,environment,interval_start,interval_end,currency,active_subscriptions"))

            // The page in a browser: no console message, each chart mark carries the row's figure.
            let (dom, console) = try HeadlessChromium.load(directory + "/report.html")
            #expect(console.isEmpty, "console: \(console)")
            let mrrChart = try #require(try HeadlessChromium.captures(#"(<svg class="chart" id="mrr-0"[\s\S]*?</svg>)"#, in: dom).first)
            let marks = try HeadlessChromium.captures(#"class="point" data-interval="[^"]+" data-value="([^"]+)""#, in: mrrChart)
            #expect(marks == rows.map { Self.decimal($0["mrr"]) }, "\(marks)")
            let active = try #require(try HeadlessChromium.captures(#"(<svg class="chart" id="active-0"[\s\S]*?</svg>)"#, in: dom).first)
            let series = try #require(try HeadlessChromium.captures(#"(<g class="series" data-series="active_subscriptions">[\s\S]*?</g>)"#, in: active).first)
            #expect(try HeadlessChromium.captures(#"data-value="(\d+)""#, in: series) == rows.map { String($0["active_subscriptions"] as? Int ?? -1) })
            for id in ["flow-0", "trials-0", "refunds-0"] { #expect(dom.contains("id=\"\(id)\""), "the \(id) chart") }
            #expect(dom.contains("not accounting"))
            let png = scratch.appendingPathComponent("metrics.png").path
            try HeadlessChromium.screenshot(directory + "/report.html", to: png)
            #expect(((try FileManager.default.attributesOfItem(atPath: png)[.size] as? Int) ?? 0) > 20_000)

            // Exchange rates: a total row per interval, in the target currency.
            let rates = scratch.appendingPathComponent("rates.csv").path
            try "currency,EUR\nUSD,0.5\n".write(toFile: rates, atomically: true, encoding: .utf8)
            let totals = try await BuiltBinary.run(["metrics", "--json", "--rates", rates, "--report-dir", directory + "-rates"] + range, environment: database)
            #expect(totals.exitCode == 0, "\(totals.combined)")
            let totalRows = try #require(try Self.json(totals.standardOutput)["rows"] as? [[String: Any]]).filter { $0["total"] as? Bool == true }
            #expect(totalRows.count == 9 && totalRows.allSatisfy { $0["currency"] as? String == "EUR" })

            // Apple's price points (figures made up for the test): the periods they match earn the
            // point's year-2 proceeds (the configuration's Small Business Program), as the database
            // gives them for the same points; a file that does not parse is a 78 naming it and the line.
            let points = scratch.appendingPathComponent("price-points.csv").path
            try "\(PricePoints.header)\ncom.example.simulated.monthly,USA,4.99,3.40,4.10\n".write(toFile: points, atomically: true, encoding: .utf8)
            let priced = try await BuiltBinary.run(["metrics", "--json", "--config", config, "--price-points", points, "--report-dir", directory + "-points"] + range, environment: database)
            #expect(priced.exitCode == 0, "\(priced.combined)")
            let pricedJSON = try Self.json(priced.standardOutput)
            #expect((pricedJSON["choices"] as? [String: Any])?["price_points"] as? Int == 1)
            let pricedRows = try #require(pricedJSON["rows"] as? [[String: Any]])
            let point = PricePoints.Point(productId: "com.example.simulated.monthly", territory: "USA", customerPrice: 4990, proceeds: 3400, proceedsYear2: 4100)
            let pricedDirect = try await store.revenueMetrics(from: from, to: to, choices: MetricsChoices(smallBusinessProgram: true), asOf: Date(), pricePoints: PricePoints(points: [point]))
            #expect(pricedRows.map { Self.decimal($0["estimated_proceeds"]) } == pricedDirect.map { Self.decimal(Double($0.estimatedProceeds) / 1000) })
            #expect(pricedRows.map { $0["proceeds_estimated"] as? Int } == pricedDirect.map { Int($0.proceedsEstimated) })
            #expect(pricedDirect.map(\.estimatedProceeds) != direct.map(\.estimatedProceeds), "the points change the proceeds")
            try "\(PricePoints.header)\ncom.example.simulated.monthly,USA,4.99,5.10,4.10\n".write(toFile: points, atomically: true, encoding: .utf8)
            let badPoints = try await BuiltBinary.run(["metrics", "--price-points", points] + range, environment: database)
            #expect(badPoints.exitCode == 78 && badPoints.standardError.contains(points) && badPoints.standardError.contains("line 2"), "\(badPoints.combined)")

            // Bad input: usage (64) and configuration (78) errors, each saying what is wrong.
            for arguments in [["--interval", "hour"], ["--from", "2026-02-02", "--to", "2026-02-01"], ["--convention", "chartmogul"], ["--refunds", "never"], ["--grace-period", "some"], ["--from", "yesterday"]] {
                let refused = try await BuiltBinary.run(["metrics"] + arguments, environment: database)
                #expect(refused.exitCode == 64, "\(arguments): \(refused.combined)")
            }
            try "currency,GBP\nEUR,1.1\n".write(toFile: rates, atomically: true, encoding: .utf8)
            let missing = try await BuiltBinary.run(["metrics", "--rates", rates, "--report-dir", directory + "-missing"] + range, environment: database)
            #expect(missing.exitCode == 78 && missing.standardError.contains(rates) && missing.standardError.contains("USD"), "\(missing.combined)")
            try "not a rates file".write(toFile: rates, atomically: true, encoding: .utf8)
            let unparsed = try await BuiltBinary.run(["metrics", "--rates", rates] + range, environment: database)
            #expect(unparsed.exitCode == 78 && unparsed.standardError.contains(rates), "\(unparsed.combined)")
            try Self.configuration.replacingOccurrences(of: "P1Y", with: "one year").write(toFile: config, atomically: true, encoding: .utf8)
            let badProduct = try await BuiltBinary.run(["metrics", "--config", config] + range, environment: database)
            #expect(badProduct.exitCode == 78 && badProduct.standardError.contains("products.com.example.simulated.annual"), "\(badProduct.combined)")
        }
    }

    /// A JSON number as the files print it (9.99, 4, 0.005).
    static func decimal(_ value: Any?) -> String {
        guard let number = value as? Double else { return "?" }
        let milliunits = Int64((number * 1000).rounded())
        var text = "\(milliunits / 1000)"
        let fraction = abs(milliunits % 1000)
        if fraction != 0 {
            var digits = String(fraction)
            digits = String(repeating: "0", count: 3 - digits.count) + digits
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return text
    }
}

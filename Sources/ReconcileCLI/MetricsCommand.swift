import ArgumentParser
import Decisions
import FailureKind
import Deployment
import DeploymentConfiguration
import Foundation
import Ledger
import LedgerSupport
import Logging
import Reports
import RevenueMetrics

struct MetricsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "What the ledger is worth: MRR, active subscriptions, churn, trials and refunds, per App Store, interval and currency.",
        discussion: """
            Computed by the database from Apple's signed transactions (app_store.subscription_periods and \
            app_store.metrics, migrations 0031 and 0032; docs/metrics.md defines every figure and the choices behind them). \
            Writes metrics.json ({"rows": [...]}), metrics.csv and report.html (charts) into --report-dir, and \
            prints a summary of the last interval (--json: metrics.json's text). Operating metrics, exact on Apple's \
            signed data, not accounting: App Store Connect's reports are the record.

            With --price-points, a paid period whose product, storefront and price match one of Apple's price \
            points earns that point's proceeds (proceeds_year2 after a year of paid service); the others keep the \
            estimate, and each row's proceeds_estimated counts them.

            A product's duration comes from the configuration's `products` (id: P1M), else from its periods' \
            lengths; a product with neither is listed as unnormalised and left out of MRR. Needs only DATABASE_URL \
            (and --config for `products` and `smallBusinessProgram`).

            \(ExitStatus.summary)
            """
    )

    @Option(help: ArgumentHelp("The first interval holds this date (YYYY-MM-DD, UTC, or an ISO 8601 time); default: 30 days, 12 weeks or 12 months before --to.", valueName: "date"), transform: Self.date)
    var from: Date?

    @Option(help: ArgumentHelp("The last interval holds the instant before this date; default: the start of tomorrow (UTC).", valueName: "date"), transform: Self.date)
    var to: Date?

    @Option(help: ArgumentHelp("day, week (from Monday) or month; intervals start at 00:00 UTC.", valueName: "interval"))
    var interval: String = "day"

    @Option(help: ArgumentHelp("How a price becomes a month's for MRR: exact (price × (365.25 / 12) / period_days) or revenuecat (a week ×4, a month ×1, a year ÷12).", valueName: "convention"))
    var convention: String = "exact"

    @Option(help: ArgumentHelp("Where a refund is counted: refund-date (when Apple refunded it) or at-purchase (the refunded period's start).", valueName: "placement"))
    var refunds: String = "refund-date"

    @Option(name: .customLong("grace-period"), help: ArgumentHelp("Whether billing grace time is access: active (until the grace period ends) or lapsed (the access ends at the expiry).", valueName: "choice"))
    var gracePeriod: String = "active"

    @Option(help: ArgumentHelp("A CSV of exchange rates (a header `currency,USD`, then `EUR,1.08` lines): adds a total row per App Store and interval in that currency.", valueName: "file"))
    var rates: String?

    @Option(name: .customLong("price-points"), help: ArgumentHelp("A CSV of Apple's price points (a header `product_id,territory,customer_price,proceeds,proceeds_year2`, amounts as App Store Connect gives them): Apple's proceeds for the periods they match, instead of the 70% / 85% estimate.", valueName: "file"))
    var pricePoints: String?

    @Option(name: .customLong("as-known-at"), help: ArgumentHelp("The numbers as the ledger knew them at this time (ISO 8601), rebuilt from the change feed: before a recovery, say.", valueName: "time"), transform: Self.date)
    var asKnownAt: Date?

    @Flag(help: "Print metrics.json's text instead of the summary.")
    var json = false

    @Option(help: ArgumentHelp("Where the files go (default: appstore-reconcile-metrics-<time>).", valueName: "dir"))
    var reportDir: String?

    @OptionGroup var database: DatabaseOptions

    static func date(_ text: String) throws -> Date {
        if text.count == 10, let day = try? Date(text + "T00:00:00Z", strategy: .iso8601) { return day }
        return try OutageWindow.argument(text)
    }

    var choices: MetricsChoices {
        get throws {
            guard let interval = MetricsInterval(rawValue: interval) else { throw ValidationError("--interval must be day, week or month, not '\(interval.prefix(20))'") }
            guard let convention = MRRConvention(rawValue: convention) else { throw ValidationError("--convention must be exact or revenuecat, not '\(convention.prefix(20))'") }
            guard let refunds = RefundPlacement(rawValue: refunds) else { throw ValidationError("--refunds must be refund-date or at-purchase, not '\(refunds.prefix(20))'") }
            guard let grace = GracePeriodChoice(rawValue: gracePeriod) else { throw ValidationError("--grace-period must be active or lapsed, not '\(gracePeriod.prefix(20))'") }
            return MetricsChoices(interval: interval, convention: convention, refunds: refunds, gracePeriod: grace)
        }
    }

    func range(now: Date) throws -> (from: Date, to: Date) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let to = self.to ?? calendar.date(byAdding: .day, value: 1, to: calendar.startOfDay(for: now))!
        let from = try self.from ?? choices.interval.defaultFrom(to: to)
        guard from < to else { throw ValidationError("--from must be before --to") }
        guard to.timeIntervalSince(from) <= 20 * 366 * 86_400 else { throw ValidationError("--from and --to may be at most 20 years apart") }
        return (from, to)
    }

    /// `--price-points`: a file that cannot be read, is too large or does not parse is a
    /// configuration error (78) naming it and the line.
    static func readPricePoints(_ path: String) throws -> PricePoints {
        guard let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int else { throw ConfigurationError(setting: "--price-points \(path)", problem: "cannot be read") }
        guard size <= PricePoints.maximumBytes else {
            throw ConfigurationError(setting: "--price-points \(path)", problem: "is larger than \(PricePoints.maximumBytes >> 20) MB: give the points of the prices you charge")
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError(setting: "--price-points \(path)", problem: "cannot be read as UTF-8 text")
        }
        do { return try PricePoints(csv: text) } catch { throw ConfigurationError(setting: "--price-points \(path)", problem: error.description) }
    }

    func validate() throws {
        _ = try choices
        _ = try range(now: Date())
    }

    func run() async throws {
        try await withExitStatus {
            let now = Date()
            let (from, to) = try range(now: now)
            let file = try database.configurationFile(keysNeeded: false)
            var chosen = try self.choices
            chosen.smallBusinessProgram = file?.smallBusinessProgram ?? false
            let choices = chosen
            let rates = try rates.map { path in
                guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
                    throw ConfigurationError(setting: "--rates \(path)", problem: "cannot be read")
                }
                do { return try ExchangeRates(csv: text) } catch let problem as ExchangeRates.Problem { throw ConfigurationError(setting: "--rates \(path)", problem: problem.description) }
            }
            let points = try pricePoints.map(Self.readPricePoints)
            let url = try database.settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.metrics")
            try await LedgerDatabase.checkReachable(url, logger: logger)
            let products = file?.products ?? [:]
            let knownAt = asKnownAt
            let (rows, unnormalised) = try await withGracefulShutdown(databaseURL: url, logger: logger) { store, _ in
                if let knownAt {
                    guard let first = try await store.firstChangeRecorded(), first <= knownAt else {
                        throw MetricsUsageError(description: "--as-known-at \(knownAt.formatted(.iso8601)) is before the change feed's first change: the ledger's state then is not recorded (prune may have removed it)")
                    }
                }
                try await store.configureProductDurations(products)
                let rows = try await store.revenueMetrics(from: from, to: to, choices: choices, asOf: knownAt ?? now, knownAt: knownAt, pricePoints: points)
                return (rows, try await store.unnormalisedProducts())
            }
            var all = rows
            if let rates, let path = self.rates {
                let missing = rates.missing(in: rows)
                guard missing.isEmpty else {
                    throw ConfigurationError(setting: "--rates \(path)", problem: "has no rate for \(missing.joined(separator: ", ")), a currency the ledger holds")
                }
                all += rates.totals(of: rows)
            }
            var result = MetricsResult(rows: all, unnormalised: unnormalised, choices: choices, from: from, to: to)
            result.knownAt = knownAt
            result.pricePoints = points?.points.count
            let directory = reportDir ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-metrics", dryRun: false, now: now)
            try MetricsFiles.write(result, to: directory)
            if json {
                print(MetricsFiles.json(result), terminator: "")
            } else {
                print(MetricsFiles.summary(result))
                print("Files: \(directory)/metrics.json, metrics.csv, report.html")
            }
        }
    }
}

/// A flag value the ledger shows to be wrong (exit 64).
struct MetricsUsageError: KindedFailure {
    var description: String
    var failureKind: FailureKind { .usage }
}

import ArgumentParser
import Decisions
import Deployment
import Foundation
import Reconciliation
import RemedyDecisions
import Reports

struct CompensateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compensate",
        abstract: "Extend the renewal date of the subscribers an outage locked out (Apple's reason code 3, service issue or outage).",
        discussion: """
            After the window was recovered (run), for every configured app and environment (--app, --environment \
            narrow): the auto-renewable subscriptions with a notification signed in [--start, --end) that the live \
            server missed (recovered by a run) and whose absence denied access (\(CompensationRules.typesThatDeny.joined(separator: ", ")); \
            never \(CompensationRules.typesThatNeverDeny.joined(separator: ", ")), which come while the \
            customer has access), for at least --min-hours: from when the access ended (a renewal: the later of its \
            signedDate and the expiry the ledger held before it, since Apple charges up to 24 hours early; the others: \
            the signedDate) to its recording, or to an earlier grant the live server received; and that the ledger \
            holds active now. A renewal recorded before the old period ran out denied nothing. Apple's rules are \
            applied before sending: a family member's share, an ASSIGNED seat, a free offer period or no paid period \
            yet are skipped (not sent, no exit 3), and a subscription the other remedy of an overlapping window made \
            good is skipped unless --again. Each \
            gets Extend a Subscription Renewal Date: --days, else ceil(hours denied / 24), 1 to 90 days. The \
            requestIdentifier is derived from the app, environment, originalTransactionId and the window, so the same \
            window compensated again sends nothing new (a request whose answer was lost is sent again, the same \
            identifier). Apple allows two extensions of a subscription in 365 days: a third is skipped and reported. \
            app_store.renewal_extensions keeps each one; the ledger's expiry moves when Apple's \(CompensationRules.typesThatExtend.joined(separator: " or ")) \
            notification is recorded (serve, or the next run). --dry-run sends and writes nothing and lists who, how \
            long denied and the days each would get. Exit 3 when Apple refused any, or one is left pending or not sent \
            (the next compensate of the window sends it).

            --all-active --days N [--product ID] (with the outage's --start and --end): Extend Subscription Renewal Dates \
            for All Active Subscribers of each product (every product the ledger holds subscriptions of, or --product), \
            once per outage (the requestIdentifier is derived from the pair, product and window, not the days: a rerun \
            with other days follows the same request), every product \
            first, then Get Status of Subscription Renewal Date Extensions every --poll-seconds until Apple completes \
            each (hours or days); stopped (SIGTERM, 130) or killed, the same command follows the same requests. The \
            report gives Apple's counts.

            \(ExitStatus.summary)
            """
    )

    @Option(help: "Start of the outage: ISO 8601 with an offset or UNIX milliseconds.", transform: OutageWindow.argument)
    var start: Date

    @Option(help: "End of the outage (exclusive), same forms.", transform: OutageWindow.argument)
    var end: Date

    @Option(help: "Hours of denied access that count as hurt.")
    var minHours = 1.0

    @Option(help: "Days to extend each by (1 to 90); without it, ceil(hours denied / 24). Required with --all-active.")
    var days: Int?

    @Flag(help: "Every active subscriber of each product (Apple's mass extension), for outages of the whole service.")
    var allActive = false

    @Option(help: "With --all-active: only this product.")
    var product: String?

    @Option(help: "With --all-active: seconds between Apple's status checks.")
    var pollSeconds = 300.0

    @Flag(
        help: """
            Send even where the other remedy of an overlapping window made the product good (the mass extension for \
            the per-subscription one, or the reverse). It costs: each extension is permanent, Apple emails every \
            customer, and it uses one of the customer's two extensions in 365 days, so the next outage's remedy may be \
            refused.
            """)
    var again = false

    @Flag(help: "Send and write nothing; list who would be extended, for how long denied, and by how many days.")
    var dryRun = false

    @Option(help: "Where to write report.html, report.md and report.json (default: ./appstore-reconcile-compensate-TIMESTAMP).")
    var reportDir: String?

    @Flag(help: "No live progress line.")
    var noProgress = false

    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        if let days, !CompensationRules.allowedDays.contains(days) {
            throw ValidationError("--days must be \(CompensationRules.allowedDays.lowerBound) to \(CompensationRules.allowedDays.upperBound) (Apple's limit)")
        }
        guard start < end else { throw ValidationError("--start must be before --end") }
        if allActive {
            guard days != nil else { throw ValidationError("--all-active needs --days") }
            guard pollSeconds > 0 else { throw ValidationError("--poll-seconds must be positive") }
        } else {
            guard product == nil else { throw ValidationError("--product goes with --all-active") }
            guard minHours >= 0 else { throw ValidationError("--min-hours must not be negative") }
        }
    }

    var scope: Compensation.Scope {
        if allActive, let days {
            return .allActive(
                days: days, productId: product, intent: CompensationRules.massIntent(start: start, end: end), pollInterval: .milliseconds(Int64(pollSeconds * 1000)), window: start..<end, again: again)
        }
        return .window(start: start, end: end, minimumHours: minHours, days: days, again: again)
    }

    func run() async throws {
        try await withExitStatus {
            let deployment = try options.deployment()
            let mode: RunMode = dryRun ? .dryRun : .apply
            let directory = reportDir ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-compensate", dryRun: dryRun)
            let layout = RunLayout(deployment)
            let job = RunService.Job.compensate(scope, mode: mode)
            let results = try await deployment.runReconciliations(
                label: "compensate", layout: layout, progress: !noProgress, concurrency: RecoveryRunOptions.defaultConcurrentPairs
            ) { _ in job }
            try conclude(results, layout: layout, reportDirectory: directory, dryRun: dryRun, title: "appstore-reconcile compensate", summary: \.compensationSummaryLine)
        }
    }
}

import ArgumentParser
import Decisions
import Foundation
import Ledger
import Reconciliation
import SignedData

struct ConsumptionRequestsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consumption-requests",
        abstract: "Find the refund requests (CONSUMPTION_REQUEST) missed since the last check: the job to schedule every hour.",
        discussion: """
            Apple's Send Consumption Information page says: "Respond within 12 hours of receiving the CONSUMPTION_REQUEST \
            notification" (\(ConsumptionDeadline.documentation)); a nightly run finds most of them too late. This check asks \
            Get Notification History for notificationType CONSUMPTION_REQUEST alone, from the end of the last successful \
            check's window less --overlap-hours to --settle-minutes before now (the first check looks back \
            --first-lookback-hours), verifies each, and records the missed ones as `serve` records live ones: the \
            notification, its row in app_store.consumption_requests (sent, deadline 12 hours later, answered_date for your \
            code to set) and a change-feed row. Answer each with \(ConsumptionDeadline.endpoint). It holds a lock of its own: \
            a long nightly run does not hold it up. Pass 2 does not run; the next nightly run repairs the accounts.

            With --answer, it then answers every open refund request (not answered, deadline ahead, not decided by Apple; \
            a transaction's repeated requests once) of each app whose configuration names a facts query \
            (apps[].refundRequests.facts: one SELECT over your own tables, checked before anything is sent; see \
            docs/production.md): no row is `no_facts` and customer_consented not true is `no_consent` (nothing sent); a value \
            Apple refuses is `invalid` (nothing sent); otherwise the answer is sent, and Apple's 202 marks the request \
            answered. Apple's refusal is `failed`, sent again at the next check. app_store.consumption_answers keeps each \
            answer; report.json lists them under `answers`. Exit 3 when any is invalid or failed.

            \(ExitStatus.summary)
            """
    )

    @Option(help: "Hours before the last successful check's window end to start again from.")
    var overlapHours = 1.0

    @Option(help: "Minutes before now to stop at.")
    var settleMinutes = 1.0

    @Option(help: "With no successful check recorded, how many hours back the first one looks.")
    var firstLookbackHours = 24.0

    @Flag(help: "Answer the open refund requests with Send Consumption Information, from each app's refundRequests.facts query (with --dry-run: list what would be sent).")
    var answer = false

    @Option(help: "With --answer: seconds one request's facts query may run before that request is failed (the others go on).")
    var factsTimeout = 5.0

    @OptionGroup var recovery: RecoveryRunOptions

    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        guard overlapHours >= 0, settleMinutes >= 0, firstLookbackHours > 0 else {
            throw ValidationError("--overlap-hours and --settle-minutes must not be negative, --first-lookback-hours must be positive")
        }
        guard factsTimeout > 0, factsTimeout <= 300 else { throw ValidationError("--facts-timeout must be above 0 and at most 300 seconds") }
        guard recovery.shard == nil else { throw ValidationError("consumption-requests takes no --shard: one check covers the window") }
    }

    func run() async throws {
        try await withExitStatus(logFormat: recovery.logFormat, job: true) {
            let window = ReconciliationRun.WindowChoice.nightly(
                firstStart: Date().addingTimeInterval(-firstLookbackHours * 3600), overlap: overlapHours * 3600, settle: settleMinutes * 60
            )
            var request = recovery.request(kind: .consumptionRequests, window: window)
            request.repair = false
            // Every type of a refund request's episode: Apple's decisions too, since a request signed
            // after a decision of its transaction is a new request (migration 0022), which the ledger
            // can tell only once it holds the decision.
            request.onlyTypes = NotificationTypePolicy.types { $0.refundEpisode != nil }
            try await recovery.execute(request, configuration: options, answering: answer ? .milliseconds(Int64(factsTimeout * 1000)) : nil)
        }
    }
}

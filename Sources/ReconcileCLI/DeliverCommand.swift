import ArgumentParser
import Decisions
import Deployment
import Foundation
import Ledger
import Logging
import Reconciliation

struct DeliverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliver",
        abstract: "Send your webhook handler the recovered notifications still pending for it.",
        discussion: """
            A run with --deliver-to URL queues every notification it recovers for that URL in app_store.deliveries \
            (in the transaction that records it) and POSTs them after its passes. What the handler did not accept \
            stays pending; this sends it: each notification's original body {"signedPayload":"…"} \
            (Content-Type: application/json), in signedDate order, one at a time, each answer committed before the \
            next POST. A 2xx marks it delivered: it is never sent to that URL again. Anything else (a redirect \
            included: none is followed) is retried in later rounds (\(DeliveryPolicy().summary)) and otherwise \
            stays pending; one refused --max-attempts times (over all runs) is parked as failed and sent no more \
            until --retry-failed. --list shows what is pending and parked, with each one's attempts and last \
            answer. Give a credential with --header (from an environment variable or a file), not in the URL: \
            output shows only the URL's scheme and host. A notification can still reach your handler twice (a 2xx that came after the timeout, \
            or was never recorded because the process died): your handler must dedupe by notificationUUID, as it \
            must for Apple's own retries. One deliverer per URL at a time. Needs only DATABASE_URL.

            Exit codes: 0 nothing left pending or parked; 3 some notifications still pending or parked (the handler \
            refused them or did not answer); 75 another process is delivering to this URL, or the database is unavailable; 78 \
            configuration error; 130 stopped by SIGTERM or SIGINT (each answer received was recorded).
            """
    )

    @Option(help: ArgumentHelp("Your webhook handler: https, or plain http to a loopback address.", valueName: "url"))
    var to: DeliveryURLArgument

    @Option(help: ArgumentHelp(DeliveryHeaderArgument.help, valueName: "'Name: value'"))
    var header: [DeliveryHeaderArgument] = []

    @Flag(help: "List what is pending, in the order it would be sent, and send nothing.")
    var dryRun = false

    @Flag(help: "List what is pending and what is parked as failed, with attempts and last answer, and send nothing.")
    var list = false

    @Flag(help: "Make the notifications parked as failed pending again (their attempts counted from zero), then deliver.")
    var retryFailed = false

    @Option(help: ArgumentHelp("Seconds your handler has to answer a POST before the attempt counts as failed.", valueName: "seconds"))
    var timeout = 10

    @Option(help: ArgumentHelp("POSTs under way at once, at most (one keeps them in order).", valueName: "n"))
    var concurrency = 1

    @Option(help: ArgumentHelp("Attempts (over all runs) after which a notification is parked as failed.", valueName: "n"))
    var maxAttempts = 12

    @OptionGroup var database: DatabaseOptions

    mutating func validate() throws {
        var url: DeliveryURLArgument? = to
        try DeliveryOption.resolve(&url, headers: header, urlOption: "--to", headerOption: "--header")
        to = url ?? to
        guard timeout >= 1, concurrency >= 1, maxAttempts >= 1 else { throw ValidationError("--timeout, --concurrency and --max-attempts must be at least 1") }
        guard !(list && (dryRun || retryFailed)) else { throw ValidationError("--list sends nothing: give it without --dry-run or --retry-failed") }
    }

    func run() async throws {
        try await withExitStatus {
            guard let target = to.target else { throw ValidationError("--to is not a URL") }
            let url = try database.settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.deliver")
            if list {
                let listing = try await LedgerDatabase.withStore(url, logger: logger) { store in
                    try await store.deliveryListing(to: target.key)
                }
                let parked = listing.filter(\.failed).count
                print("For \(target): \(listing.count - parked) pending, \(parked) parked as failed; nothing was sent.")
                for entry in listing {
                    let answer = entry.lastError ?? entry.lastStatus.map { "HTTP \($0)" } ?? "not tried yet"
                    print(
                        "  \(entry.failed ? "failed " : "pending")  \(entry.signedDate.formatted(.iso8601))  \(entry.notificationUUID.uuidString.lowercased())  "
                            + "\(entry.attempts) attempt(s)  \(answer.prefix(120))")
                }
                return
            }
            if dryRun {
                let pending = try await LedgerDatabase.withStore(url, logger: logger) { store in
                    try await store.pendingDeliveryList(to: target.key)
                }
                print("Pending for \(target): \(pending.count) notification(s); nothing was sent.")
                for (uuid, signedDate) in pending { print("  \(signedDate.formatted(.iso8601))  \(uuid.uuidString.lowercased())") }
                return
            }
            try await LedgerDatabase.checkReachable(url, logger: logger)
            let policy = DeliveryPolicy(requestTimeout: .seconds(timeout), maximumAttempts: maxAttempts, concurrency: concurrency)
            let retryFailed = self.retryFailed
            let (summary, stopped, unparked) = try await withGracefulShutdown(databaseURL: url, logger: logger) { store, stop in
                let unparked = retryFailed ? try await store.retryFailedDeliveries(to: target.key) : 0
                let summary = try await NotificationRedelivery(store: store, target: target, policy: policy, logger: logger, stop: stop).deliverPending()
                return (summary, stop.isRequested, unparked)
            }
            if retryFailed { print("\(unparked) parked notification(s) made pending again.") }
            print(
                "Delivered \(summary.delivered) to \(target) (\(summary.attempts) POSTs); \(summary.pending) still pending, \(summary.parkedInAll) parked as failed"
                    + (summary.parked > 0 ? " (\(summary.parked) in this run)." : "."))
            if stopped {
                printError("interrupted: every answer received was recorded; run deliver again to send the rest.")
                throw ExitCode(ExitStatus.interrupted)
            }
            if summary.pending > 0 || summary.parkedInAll > 0 {
                printError(
                    "\(summary.pending) notification(s) still pending and \(summary.parkedInAll) parked for \(target): run deliver again later "
                        + "(--retry-failed for the parked ones); deliver --list shows each one's last answer")
                throw ExitCode(ExitStatus.doneWithRejections)
            }
        }
    }
}

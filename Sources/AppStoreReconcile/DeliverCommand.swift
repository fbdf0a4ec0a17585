import ArgumentParser
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
            stays pending. A notification can still reach your handler twice (a 2xx that came after the timeout, \
            or was never recorded because the process died): your handler must dedupe by notificationUUID, as it \
            must for Apple's own retries. One deliverer per URL at a time. Needs only DATABASE_URL.

            Exit codes: 0 nothing left pending; 3 some notifications still pending (the handler refused them or did \
            not answer); 75 another process is delivering to this URL, or the database is unavailable; 78 \
            configuration error; 130 stopped by SIGTERM or SIGINT (each answer received was recorded).
            """
    )

    @Option(help: ArgumentHelp("Your webhook handler: https, or plain http to a loopback address.", valueName: "url"))
    var to: String

    @Flag(help: "List what is pending, in the order it would be sent, and send nothing.")
    var dryRun = false

    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        do { _ = try DeliveryTarget(to) } catch let error as DeliveryTargetError {
            throw ValidationError("--to \(error.description)")
        }
    }

    func run() async throws {
        try await withExitStatus {
            let target = try DeliveryTarget(to)
            let url = try database.settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.deliver")
            if dryRun {
                let pending = try await LedgerDatabase.withClient(url, logger: logger) { client in
                    try await LedgerStore(client: client, logger: logger).pendingDeliveryList(to: target.url)
                }
                print("Pending for \(target): \(pending.count) notification(s); nothing was sent.")
                for (uuid, signedDate) in pending { print("  \(signedDate.formatted(.iso8601))  \(uuid.uuidString.lowercased())") }
                return
            }
            try await LedgerDatabase.checkReachable(url, logger: logger)
            let (summary, stopped) = try await withGracefulShutdown(databaseURL: url, logger: logger, announceStop: false) { store, stop in
                let summary = try await NotificationRedelivery(store: store, target: target, logger: logger, stop: stop).deliverPending()
                return (summary, stop.isRequested)
            }
            print("Delivered \(summary.delivered) to \(target) (\(summary.attempts) POSTs); \(summary.pending) still pending.")
            if stopped {
                printError("interrupted: every answer received was recorded; run deliver again to send the rest.")
                throw ExitCode(ExitStatus.interrupted)
            }
            if summary.pending > 0 {
                printError("\(summary.pending) notification(s) still pending for \(target): run deliver again later; app_store.deliveries has each one's last answer")
                throw ExitCode(ExitStatus.doneWithRejections)
            }
        }
    }
}

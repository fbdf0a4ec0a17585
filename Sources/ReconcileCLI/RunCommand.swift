import AppStoreServerAPI
import ArgumentParser
import Decisions
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Recover an outage window: apply to the ledger exactly the notifications it missed.",
        discussion: """
            Pages Apple's Get Notification History for [--start, --end): first DID_RENEW and EXPIRED, one query \
            per subtype (a type filter without a subtype returns only notifications without one), then every \
            other notification once. Verifies every signed payload, compares notificationUUID and signedDate with \
            the ledger a page at a time, and applies only what was missed, one database transaction per page. A \
            notification signed earlier never overwrites a subscription's state from one signed later.

            Then pass 2 (unless --skip-repair): every customer whose record may still be wrong (touched by a \
            recovered notification, named in a rejected payload, or contradicting itself in the ledger) gets the \
            truth from Get Transaction History, starting at the stored revision, and Get All Subscription Statuses.

            Run it first with --dry-run: it writes nothing and reports what would change. Every run writes \
            report.html (to open in a browser), report.md (text) and report.json (for scripts) to --report-dir and \
            prints a summary.

            Needs every setting: APPSTORE_ISSUER_ID, APPSTORE_KEY_ID, APPSTORE_PRIVATE_KEY, APPSTORE_BUNDLE_ID, \
            APPSTORE_APP_APPLE_ID (Production), APPSTORE_ENVIRONMENT, APPSTORE_ROOT_CERTIFICATES, DATABASE_URL.

            \(ExitStatus.summary)
            """
    )

    @Option(help: "Start of the window: ISO 8601 with an offset (2026-11-18T02:00:00Z) or UNIX milliseconds.", transform: OutageWindow.argument)
    var start: Date

    @Option(help: "End of the window (exclusive), same forms; a future time means now.", transform: OutageWindow.argument)
    var end: Date

    @OptionGroup var recovery: RecoveryRunOptions

    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        guard start < end else { throw ValidationError(start == end ? "the window is empty: --start equals --end" : "--start must be before --end") }
    }

    func run() async throws {
        try await withExitStatus(logFormat: recovery.logFormat, job: true) {
            try await recovery.execute(recovery.request(kind: .run, window: .fixed(start: start, end: end)), configuration: options)
        }
    }
}

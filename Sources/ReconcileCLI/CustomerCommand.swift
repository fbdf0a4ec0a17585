import AppStoreServerAPI
import ArgumentParser
import Decisions
import Deployment
import Foundation
import Logging
import Reconciliation
import Reports
import SignedData

struct CustomerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "customer",
        abstract: "One customer's case for support: the ledger beside Apple's answer, the notifications recorded, the entitlements now.",
        discussion: """
            Names the account by any of its transaction IDs, by the order ID of Apple's emailed receipt (--order-id: \
            Look Up Order ID, Production only), or by the appAccountToken your app set (--app-account-token: read from \
            the ledger; several accounts may carry one, each is shown). Apple is asked as a named repair asks (Get All \
            Subscription Statuses, the whole Get Transaction History, every answer verified) and its answer is set beside \
            the ledger's rows field by field; then the notifications recorded for the account in the order Apple signed \
            them (webhook: the live server; recovered: a run), and what app_store.entitlements grants it now. --repair \
            writes Apple's answer where they differ, as `repair --transaction-id` does. In Production, a transaction ID \
            Production does not know is looked up in the app's Sandbox environment when the configuration file lists it \
            (shown as found in Sandbox: App Review, TestFlight). Exit 0 when they agree (or were \
            repaired), 3 when they differ without --repair or Apple does not know the account.

            \(ExitStatus.summary)
            """
    )

    @Argument(help: "Any transaction ID of the customer.")
    var transactionId: String?

    @Option(name: .customLong("order-id"), help: "The order ID of Apple's emailed receipt (Production only).")
    var orderId: String?

    @Option(name: .customLong("app-account-token"), help: "The appAccountToken your app set at purchase (a UUID).")
    var appAccountToken: String?

    @Flag(help: "Print the case as JSON.")
    var json = false

    @Flag(help: "Write Apple's answer where the ledger differs.")
    var repair = false

    @OptionGroup var options: ConfigurationOptions

    var subject: CustomerLookup.Subject? {
        if let transactionId { return .transactionId(transactionId) }
        if let orderId { return .orderId(orderId) }
        if let token = appAccountToken.flatMap(UUID.init(uuidString:)) { return .appAccountToken(token) }
        return nil
    }

    func validate() throws {
        guard [transactionId, orderId, appAccountToken].compactMap({ $0 }).count == 1 else {
            throw ValidationError("give one of TRANSACTION_ID, --order-id or --app-account-token")
        }
        if let transactionId, !CustomerRepair.isWellFormedTransactionId(transactionId) {
            throw ValidationError(NotATransactionId(text: transactionId).description)
        }
        if let appAccountToken, UUID(uuidString: appAccountToken) == nil { throw ValidationError("--app-account-token is a UUID") }
        if let orderId, orderId.isEmpty || !orderId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
            throw ValidationError("--order-id is letters and digits, as on Apple's emailed receipt")
        }
    }

    func run() async throws {
        try await withExitStatus {
            guard let subject else { throw ExitCode(ExitStatus.usage) }
            let deployment = try options.deployment()
            let pair = try deployment.onlyPair()
            if case .orderId = subject, pair.pair.environment == .sandbox {
                printError("error: --order-id: Apple's Look Up Order ID exists in Production only (there is no Sandbox URL); choose --environment Production")
                throw ExitCode(ExitStatus.usage)
            }
            let cases: [CustomerCase]
            do {
                cases = try await deployment.customerCases(subject, repairing: repair, logger: Logger(label: "appstore-reconcile.customer"))
            } catch let notFound as CustomerNotFound {
                printError("not found: \(notFound.description)")
                throw ExitCode(ExitStatus.doneWithRejections)
            }
            if json {
                print(try CustomerCase.json(bundleId: pair.pair.bundleId, environment: pair.pair.environment.rawValue, cases: cases))
            } else {
                print(cases.map { $0.text(pair: pair.pair.description) }.joined(separator: "\n\n"))
            }
            if !cases.allSatisfy(\.agrees) { throw ExitCode(ExitStatus.doneWithRejections) }
        }
    }
}

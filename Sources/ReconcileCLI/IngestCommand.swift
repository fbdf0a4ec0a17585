import ArgumentParser
import Deployment
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData

struct IngestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Record one live notification (the body Apple POSTs to your webhook) in the ledger.",
        discussion: """
            Reads Apple's webhook body {"signedPayload": "…"} (or a bare JWS) from FILE or standard input, verifies \
            it, and records it with source 'webhook' through the same path as a recovery: a notification signed \
            earlier never overwrites newer state. A webhook handler in any language can pipe Apple's body into it.

            Exit codes: 0 recorded; 4 already recorded (a duplicate: answer Apple 200 all the same); 65 rejected: \
            malformed input (a NUL character, a key given twice, no signedPayload string; not recorded) or a payload \
            that fails verification (kept in app_store.rejected_payloads, never applied); 75 temporary failure \
            (answer Apple with an error so that it retries); 78 configuration error.
            """
    )

    @Argument(help: "The file to read, or - for standard input.")
    var input: String = "-"

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        try await withExitStatus {
            let appStore = try options.onePair()
            let verifier = try appStore.verifier()
            let databaseURL = try appStore.settings.databaseURL()
            let data: Data
            do {
                data = input == "-" ? FileHandle.standardInput.readDataToEndOfFile() : try Data(contentsOf: URL(fileURLWithPath: input))
            } catch {
                printError("error: cannot read \(input): \(error.localizedDescription)", level: .error)
                throw ExitCode(ExitStatus.noInput)
            }
            let jws: String
            do {
                jws = try PayloadInspection.signedPayload(fromInput: [UInt8](data))
            } catch let error as InspectionInputError {
                printError("rejected (malformed): \(error.description)")
                throw ExitCode(ExitStatus.payloadRejected)
            }
            let logger = Logger(label: "appstore-reconcile.ingest")
            let outcome = try await LedgerDatabase.withStore(databaseURL, logger: logger) { store in
                try await NotificationIngest(verifier: verifier, store: store).ingest(signedPayload: jws)
            }
            switch outcome {
            case .recorded(let stale):
                print(stale ? "recorded (older than the subscription's stored state, which it did not change)" : "recorded")
            case .duplicate:
                print("already recorded")
                throw ExitCode(ExitStatus.duplicate)
            case .rejected(let rejection):
                printError("rejected (\(rejection.reason.rawValue)): \(rejection.reason.explanation); \(rejection.detail)")
                throw ExitCode(ExitStatus.payloadRejected)
            case .retryLater(let reason):
                printError("not verified yet, retry later: \(reason)")
                throw ExitCode(ExitStatus.temporaryFailure)
            }
        }
    }
}

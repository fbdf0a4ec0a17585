import AppStoreServerAPI
public import ArgumentParser
import Deployment
import Foundation
import Logging
import Reconciliation
import SignedData

struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Verify one signed payload from Apple and print it decoded.",
        discussion: """
            Reads a bare JWS, Apple's webhook body {"signedPayload": "…"}, or one Get Notification History item, \
            from FILE or standard input. Verifies it as the reconciler does: ES256 signature, the x5c chain \
            leaf → intermediate → one of the configured root certificates, Apple's marker extensions, \
            certificate validity at the payload's signedDate, then bundle ID, app (Production) and environment; \
            a notification's nested signed transaction and renewal info too.

            Prints the decoded payload as JSON (nested payloads decoded in place) on standard output and a \
            one-line verdict on standard error. Needs APPSTORE_ROOT_CERTIFICATES, APPSTORE_BUNDLE_ID, \
            APPSTORE_ENVIRONMENT and, in Production, APPSTORE_APP_APPLE_ID.

            Exit codes: 0 verified; 65 rejected (the reason is printed); 75 could not be decided now \
            (an online revocation check failed to reach its responder); 66 input not readable; \
            78 configuration error.
            """
    )

    @Argument(help: "The file to read, or - for standard input.")
    var input: String = "-"

    @Option(help: "What the payload is: notification, transaction, renewal-info, app-transaction. Judged from its fields when omitted.")
    var kind: SignedPayloadKind?

    @Flag(help: "Check certificates at the current time with OCSP revocation checks (for data received just now) instead of at the payload's signedDate.")
    var online = false

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        try await withExitStatus {
            let verifier = try options.onePair().verifier(onlineChecks: online ? OnlineChecks(transport: HTTPOCSPTransport()) : nil)

            let text: String
            do {
                text = try readInput()
            } catch {
                printError("error: cannot read \(input == "-" ? "standard input" : input): \(error.localizedDescription)", level: .error)
                throw ExitCode(ExitStatus.noInput)
            }
            let jws: String
            do {
                jws = try PayloadInspection.signedPayload(fromInput: text)
            } catch let error as InspectionInputError {
                printError("rejected (malformed): \(error.description)")
                throw ExitCode(ExitStatus.payloadRejected)
            }
            let inspection = await PayloadInspection.inspect(jws, kind: kind, verifier: verifier)
            print(inspection.renderedJSON())
            printError(inspection.summaryLine)
            switch inspection.verdict {
            case .verified: return
            case .rejected: throw ExitCode(ExitStatus.payloadRejected)
            case .retryLater: throw ExitCode(ExitStatus.temporaryFailure)
            }
        }
    }

    private func readInput() throws -> String {
        let data: Data
        if input == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            data = try Data(contentsOf: URL(fileURLWithPath: input))
        }
        return String(decoding: data, as: UTF8.self)
    }
}

extension SignedPayloadKind: ExpressibleByArgument {}

import ArgumentParser
import Decisions
import Foundation
import Reconciliation

/// The headers a delivery option names (`--forward-header`, `--deliver-header`, `deliver
/// --header`), read from the environment and files now: a reference that cannot be read is a
/// usage error (exit 64, checked before anything runs, as a bad --deliver-to URL is) naming the
/// option and the variable or file, never a value.
enum DeliveryHeaderOption {
    static let help = """
        A header sent with every POST to your handler, as 'Name: value'; in the value $NAME or ${NAME} is the \
        environment variable NAME and ${file:PATH} the file's content, so a credential stays out of the URL and the \
        process list ('Authorization: Bearer $HANDLER_TOKEN'). Repeat for more.
        """

    static func parse(
        _ specs: [String], option: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> DeliveryHeaders {
        do {
            return try DeliveryHeaders.parse(specs, environment: environment) { path in try String(contentsOfFile: path, encoding: .utf8) }
        } catch {
            throw ValidationError("\(option) \(error.description)")
        }
    }
}

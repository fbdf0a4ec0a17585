import ArgumentParser
import Decisions
import Deployment
import Foundation
import Reconciliation
import SignedData

/// A handler's URL on the command line (`--deliver-to`, `--forward-to`, `deliver --to`) or in its
/// environment variable, parsed once, when it is read. A bad one is a usage error (exit 64)
/// reported by `DeliveryOption.resolve`, which names the option and never echoes the URL (it may
/// hold a password): so this never fails to parse, it holds the failure.
struct DeliveryURLArgument: ExpressibleByArgument, Sendable {
    let parsed: Result<DeliveryTarget, DeliveryTargetError>

    init(argument: String) {
        do { parsed = .success(try DeliveryTarget(argument)) } catch let error as DeliveryTargetError {
            parsed = .failure(error)
        } catch {
            parsed = .failure(DeliveryTargetError(description: "is not a URL"))
        }
    }

    init(target: DeliveryTarget) { parsed = .success(target) }

    /// The target, once `DeliveryOption.resolve` found it valid.
    var target: DeliveryTarget? { try? parsed.get() }
}

/// A header for the handler (`--forward-header`, `--deliver-header`, `deliver --header`), read
/// from the environment or a file once, when the argument is read; like the URL, its error
/// names the option and the variable or file, never a value.
struct DeliveryHeaderArgument: ExpressibleByArgument, Sendable {
    static let help = """
        A header sent with every POST to your handler, as 'Name: value'; in the value $NAME or ${NAME} is the \
        environment variable NAME and ${file:PATH} the file's content, so a credential stays out of the URL and the \
        process list ('Authorization: Bearer $HANDLER_TOKEN'). Repeat for more.
        """

    let parsed: Result<DeliveryHeaders, DeliveryHeaderError>

    init(argument: String) {
        self.init(argument, environment: ProcessInfo.processInfo.environment)
    }

    init(_ argument: String, environment: [String: String]) {
        do {
            parsed = .success(try DeliveryHeaders.parse([argument], environment: environment) { path in try String(contentsOfFile: path, encoding: .utf8) })
        } catch {
            parsed = .failure(error)
        }
    }
}

/// A handler's URL and its headers, put together once, in a command's `validate()`.
enum DeliveryOption {
    /// Checks `url` (else the environment `variable`'s URL) and `headers`, and leaves in `url`
    /// the target with its headers. A usage error names the option.
    static func resolve(
        _ url: inout DeliveryURLArgument?, headers: [DeliveryHeaderArgument], urlOption: String, headerOption: String,
        variable: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        if url == nil, let variable, let text = environment[variable], !text.isEmpty { url = DeliveryURLArgument(argument: text) }
        guard let given = url else {
            guard headers.isEmpty else { throw ValidationError("\(headerOption) needs \(urlOption)") }
            return
        }
        var target: DeliveryTarget
        switch given.parsed {
        case .success(let parsed): target = parsed
        case .failure(let error): throw ValidationError("\(urlOption) \(error.description)")
        }
        for header in headers {
            switch header.parsed {
            case .success(let parsed): target.headers = target.headers.adding(parsed)
            case .failure(let error): throw ValidationError("\(headerOption) \(error.description)")
            }
        }
        url = DeliveryURLArgument(target: target)
    }
}

extension Deployment.Pair {
    /// Where this pair's notifications go: `given` (a flag or its variable) when set, else the
    /// configuration file's `deliverTo` for the pair with `headers`; nil when neither names one.
    /// A `deliverTo` that is not a handler's URL is a configuration error naming it (exit 78).
    func deliveryTarget(given: DeliveryTarget?, headers: [DeliveryHeaderArgument]) throws -> DeliveryTarget? {
        if let given { return given }
        guard let text = deliverTo else { return nil }
        do {
            var target = try DeliveryTarget(text)
            for header in headers { if case .success(let parsed) = header.parsed { target.headers = target.headers.adding(parsed) } }
            return target
        } catch let error as DeliveryTargetError {
            throw ConfigurationError(setting: "deliverTo.\(pair.environment) of \(pair.bundleId) in the configuration file", problem: error.description)
        }
    }
}

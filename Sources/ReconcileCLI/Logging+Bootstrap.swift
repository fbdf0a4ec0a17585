import ArgumentParser
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How log lines look: `text` for people, `json` (one object per line) for log shippers.
package enum LogFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    case text
    case json

    /// The format asked for by flag, then APPSTORE_LOG_FORMAT; otherwise, for the unattended
    /// jobs (`run`, `nightly`), text on a terminal and JSON when standard error goes to a file, a
    /// pipe or a journal; text for the short commands, whose messages are their answer.
    static func resolve(_ flag: LogFormat?, job: Bool) -> LogFormat {
        if let flag { return flag }
        if let text = ProcessInfo.processInfo.environment["APPSTORE_LOG_FORMAT"], let format = LogFormat(rawValue: text.lowercased()) {
            return format
        }
        return job && isatty(STDERR_FILENO) != 1 ? .json : .text
    }
}

/// Log lines go to standard error, so that standard output carries only results (the JSON of
/// `verify`, reports). The level comes from APPSTORE_LOG_LEVEL (trace, debug, info, notice,
/// warning, error, critical); the default, notice, says what a run does without its details.
/// Nothing secret reaches a log line: the private key never leaves the token issuer, the
/// database password never leaves the connection configuration.
enum LoggingSetup {
    private static let chosen = Mutex<LogFormat?>(nil)

    /// The format in force (text until bootstrapped).
    static var format: LogFormat { chosen.withLock { $0 } ?? .text }

    /// Bootstraps swift-log once per process; later calls keep the first format.
    static func bootstrap(_ flag: LogFormat?, job: Bool) {
        let first = chosen.withLock { current -> Bool in
            guard current == nil else { return false }
            current = LogFormat.resolve(flag, job: job)
            return true
        }
        guard first else { return }
        let text = ProcessInfo.processInfo.environment["APPSTORE_LOG_LEVEL"]?.lowercased() ?? ""
        let level = Logger.Level(rawValue: text) ?? .notice
        let format = self.format
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            case .json:
                var handler = JSONLineLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }
}

/// One JSON object per log line on standard error: time (ISO 8601, UTC, milliseconds), level,
/// logger label, message, and the metadata as nested values.
struct JSONLineLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .notice
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        Self.write(level: event.level.rawValue, label: label, message: event.message.description, metadata: merged)
    }

    static func write(level: String, label: String, message: String, metadata: Logger.Metadata) {
        var object: [String: Any] = [
            "time": Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)),
            "level": level, "logger": label, "message": message,
        ]
        if !metadata.isEmpty { object["metadata"] = metadata.mapValues(Self.json) }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        FileHandle.standardError.write(data + Data("\n".utf8))
    }

    static func json(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): text
        case .stringConvertible(let convertible): convertible.description
        case .array(let values): values.map(json)
        case .dictionary(let values): values.mapValues(json)
        }
    }
}

import Foundation
import Logging

/// Log lines go to standard error, so that standard output carries only results (the JSON of
/// `verify`, reports). The level comes from APPSTORE_LOG_LEVEL (trace, debug, info, notice,
/// warning, error, critical); the default, warning, keeps a terminal quiet.
enum LoggingSetup {
    static let bootstrapped: Void = {
        let text = ProcessInfo.processInfo.environment["APPSTORE_LOG_LEVEL"]?.lowercased() ?? ""
        let level = Logger.Level(rawValue: text) ?? .warning
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }()
}

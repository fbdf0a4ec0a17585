import ArgumentParser
import Decisions
import Foundation

// The command line's values, each parsed once, where its argument is read (`@Option(transform:)`):
// a bad one is a usage error (exit 64) that names the option and says what is expected.

extension OutageWindow {
    /// `--start`, `--end`: ISO 8601 with an offset, or UNIX milliseconds.
    static func argument(_ text: String) throws -> Date {
        do { return try parseTime(text) } catch let error as WindowError { throw ValidationError(error.description) }
    }
}

extension Shard {
    /// `--shard INDEX/COUNT`.
    static func argument(_ text: String) throws -> Shard {
        do { return try Shard(parsing: text) } catch let error as ShardError { throw ValidationError(error.description) }
    }
}

/// `serve --listen HOST:PORT`.
struct ListenAddress: Hashable, Sendable, CustomStringConvertible {
    let host: String
    let port: Int

    static func argument(_ text: String) throws -> ListenAddress {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65_535).contains(port) else {
            throw ValidationError("expected HOST:PORT, such as 127.0.0.1:8080 or 0.0.0.0:8080")
        }
        let host = String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        guard !host.isEmpty else { throw ValidationError("expected HOST:PORT with a host, such as 127.0.0.1:8080") }
        return ListenAddress(host: host, port: port)
    }

    var description: String { "\(host):\(port)" }
}

/// `detect-outage --since`: a duration back from now (7d, 36h, 90m) or an ISO 8601 time.
enum SinceArgument: Sendable {
    case ago(TimeInterval)
    case at(Date)

    static func argument(_ text: String) throws -> SinceArgument {
        if let duration = OutageDetection.parseDuration(text) { return .ago(duration) }
        guard let date = try? OutageWindow.parseTime(text) else {
            throw ValidationError("expected a duration (7d, 36h, 90m) or an ISO 8601 time, not '\(text.prefix(40))'")
        }
        return .at(date)
    }

    /// The instant it names, `now` being the present.
    func instant(now: Date) -> Date {
        switch self {
        case .ago(let duration): now.addingTimeInterval(-duration)
        case .at(let date): date
        }
    }
}

extension OutageDetection {
    /// `detect-outage --gap`: a duration such as 30m or 2h, in seconds.
    static func durationArgument(_ text: String) throws -> TimeInterval {
        guard let duration = parseDuration(text) else { throw ValidationError("expected a duration such as 30m or 2h") }
        return duration
    }
}

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

import Foundation
import NIOSSL
package import PostgresNIO

/// A PostgreSQL connection URL (`DATABASE_URL`), libpq style:
/// `postgresql://user:password@host:5432/database?sslmode=require`, or a Unix socket with
/// `?host=/path/to/socket/dir`. Its `description` never shows the password.
package struct DatabaseURL: Sendable, CustomStringConvertible {
    package enum SSLMode: String, Sendable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    package var user: String
    package var password: String?
    package var host: String
    package var port: Int
    package var database: String
    /// Directory of the server's Unix socket, when connecting through one.
    package var socketDirectory: String?
    package var sslMode: SSLMode

    package init(_ text: String) throws {
        guard let components = URLComponents(string: text),
            let scheme = components.scheme, ["postgres", "postgresql"].contains(scheme)
        else {
            throw DatabaseURLError("DATABASE_URL must look like postgresql://user:password@host:5432/database")
        }
        let query = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last }
        )
        self.user = components.percentEncodedUser.flatMap { $0.removingPercentEncoding } ?? "postgres"
        self.password = components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
        self.host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        self.port = components.port ?? 5432
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        self.database = path.isEmpty ? self.user : (path.removingPercentEncoding ?? path)
        if let hostParameter = query["host"], hostParameter.hasPrefix("/") {
            self.socketDirectory = hostParameter
        }
        if let mode = query["sslmode"] {
            guard let parsed = SSLMode(rawValue: mode) else {
                throw DatabaseURLError("DATABASE_URL has an unknown sslmode '\(mode)' (disable, prefer, require, verify-ca, verify-full)")
            }
            self.sslMode = parsed
        } else if socketDirectory != nil {
            self.sslMode = .disable
        } else {
            // Over a network, a password and the ledger's rows go to a server whose certificate
            // is checked (since issue 31; before, `prefer` took any certificate, or none).
            self.sslMode = Self.isLoopback(self.host) ? .prefer : .verifyFull
        }
    }

    /// Whether `host` is this machine: localhost, 127.0.0.0/8 or ::1.
    package static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        let isIPv4 = octets.count == 4 && octets.allSatisfy { UInt8($0) != nil }
        return host == "localhost" || host == "::1" || (isIPv4 && octets[0] == "127")
    }

    /// The same URL pointing at another database on the same server.
    package func with(database: String) -> DatabaseURL {
        var copy = self
        copy.database = database
        return copy
    }

    package var description: String {
        let credentials = password == nil ? user : "\(user):***"
        var text = "postgresql://\(credentials)@\(host):\(port)/\(database)"
        if let socketDirectory { text += "?host=\(socketDirectory)" }
        return text
    }

    /// TLS as libpq's sslmode asks: nil for none, else the configuration and whether the
    /// server must accept it.
    private var tlsChoice: (configuration: TLSConfiguration, required: Bool)? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch sslMode {
        case .disable:
            return nil
        case .allow, .prefer:
            configuration.certificateVerification = .none
            return (configuration, false)
        case .require:
            configuration.certificateVerification = .none
            return (configuration, true)
        case .verifyCA:
            configuration.certificateVerification = .noHostnameVerification
            return (configuration, true)
        case .verifyFull:
            return (configuration, true)
        }
    }

    /// For a connection pool (`PostgresClient`), tuned for a batch job: connections are busy
    /// while it runs, so no keep-alive queries, and one idle for 10 s is closed. The pool
    /// schedules a timer each time a connection falls idle, and a cancelled timer's sleep keeps
    /// its memory until its deadline (seen with heaptrack: ~20,000 such sleeps live at the end of
    /// a 10,000-notification run): with the defaults (60 s idle, 30 s keep-alive) a run doing
    /// thousands of leases a second held tens of megabytes of timers.
    package var clientConfiguration: PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let socketDirectory {
            configuration = PostgresClient.Configuration(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: password, database: database
            )
        } else {
            let tls: PostgresClient.Configuration.TLS =
                tlsChoice.map { $0.required ? .require($0.configuration) : .prefer($0.configuration) } ?? .disable
            configuration = PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
        }
        configuration.options.keepAliveBehavior = nil
        configuration.options.connectionIdleTimeout = .seconds(10)
        return configuration
    }

    /// For a single connection (`PostgresConnection.connect`).
    package func connectionConfiguration() throws -> PostgresConnection.Configuration {
        if let socketDirectory {
            return PostgresConnection.Configuration(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: password, database: database
            )
        }
        var tls = PostgresConnection.Configuration.TLS.disable
        if let choice = tlsChoice {
            let context = try NIOSSLContext(configuration: choice.configuration)
            tls = choice.required ? .require(context) : .prefer(context)
        }
        return PostgresConnection.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
    }
}

package struct DatabaseURLError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
package import Logging
import Synchronization

/// A private PostgreSQL cluster in a temporary directory, for tests and the demo: started from
/// the installed server binaries, reachable only through a Unix socket in a directory only its
/// owner can enter, tuned for speed over durability, and removed again on `stop()`.
///
/// PostgreSQL refuses to run as root, so when started by root the server runs as the `postgres`
/// system user (or `nobody`). A watchdog process stops the server and deletes the directory if
/// the process that started it dies without calling `stop()` (a crash, SIGKILL), so nothing is
/// left behind either way.
package final class ThrowawayPostgres: Sendable {
    /// The temporary directory holding the data directory, the socket and the log.
    package let directory: String
    /// A role that authenticates with a password (SCRAM) when created; every other role is trusted.
    package static let passwordRole = "password_auth"

    /// The database superuser (trust authentication on the private socket).
    package let user: String
    package let port: Int
    private let binaries: String
    private let runAs: String?
    private let stopped = Mutex(false)
    private let settings: [String]
    private let logger: Logger

    package var dataDirectory: String { directory + "/data" }
    package var socketPath: String { "\(directory)/.s.PGSQL.\(port)" }
    /// A libpq-style URL: `postgresql://postgres@localhost:5432/postgres?host=/tmp/...`.
    package func url(database: String = "postgres") -> String {
        "postgresql://\(user)@localhost:\(port)/\(database)?host=\(directory)"
    }

    /// Creates and starts a cluster. Takes a second or two. `settings` (`name=value`) come after
    /// the cluster's own, which they may override (`wal_level=replica`).
    package static func start(logger: Logger = Logger(label: "throwaway-postgres"), settings: [String] = []) throws -> ThrowawayPostgres {
        let binaries = try findServerBinaries()
        let runAs: String? = geteuid() == 0 ? try unprivilegedUser() : nil
        let temporary = NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory()
        var template = Array("\(temporary)/appstore-reconcile-pg.XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else {
            throw ThrowawayPostgresError("cannot create a temporary directory: \(String(cString: strerror(errno)))")
        }
        let directory = String(cString: created)
        let cluster = ThrowawayPostgres(directory: directory, binaries: binaries, runAs: runAs, settings: settings, logger: logger)
        do {
            try cluster.initializeAndStart()
        } catch {
            cluster.stop()
            throw error
        }
        return cluster
    }

    private init(directory: String, binaries: String, runAs: String?, settings: [String], logger: Logger) {
        self.settings = settings
        self.directory = directory
        self.binaries = binaries
        self.runAs = runAs
        self.user = "postgres"
        self.port = 5432
        self.logger = logger
    }

    private func initializeAndStart() throws {
        if let runAs {
            guard let account = getpwnam(runAs) else { throw ThrowawayPostgresError("no user \(runAs)") }
            guard chown(directory, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
                throw ThrowawayPostgresError("cannot hand \(directory) to \(runAs): \(String(cString: strerror(errno)))")
            }
        }
        chmod(directory, 0o700)
        startWatchdog()
        try run(
            "initdb",
            ["-D", dataDirectory, "-U", user, "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync"],
            what: "initialize the cluster"
        )
        // The role `password_auth`, if someone creates it, must log in with its password
        // (SCRAM): tests of how a real password is handled need a server that asks for one.
        let hba = dataDirectory + "/pg_hba.conf"
        let rules = (try? String(contentsOfFile: hba, encoding: .utf8)) ?? ""
        try ("local all \(Self.passwordRole) scram-sha-256\n" + rules).write(toFile: hba, atomically: false, encoding: .utf8)
        try startServer()
        logger.debug("throwaway PostgreSQL started", metadata: ["directory": "\(directory)"])
    }

    /// Settings added by whoever starts the process, for profiling (the benchmark's
    /// `pg_stat_statements` figures): `THROWAWAY_POSTGRES_SETTINGS="shared_preload_libraries=pg_stat_statements"`,
    /// several separated by spaces.
    static func extraSettings(_ environment: [String: String]) -> [String] {
        (environment["THROWAWAY_POSTGRES_SETTINGS"] ?? "").split(separator: " ").map(String.init)
    }

    private func startServer() throws {
        // fsync off: nothing is flushed to the disk, which only an operating system's crash would
        // notice. synchronous_commit stays on: a commit is in the WAL (the kernel's cache) before
        // it is acknowledged, so a server killed by `crash()` keeps every commit it acknowledged,
        // as a real one does; tests of what survives a crash depend on it. wal_level logical: the
        // outbox's publication is made and read through a replication slot (issue 66).
        let settings = [
            "listen_addresses=''", "unix_socket_directories='\(directory)'", "unix_socket_permissions=0700",
            "port=\(port)", "fsync=off", "full_page_writes=off",
            "max_connections=400", "shared_buffers=128MB", "max_locks_per_transaction=256", "wal_level=logical",
        ] + self.settings + Self.extraSettings(ProcessInfo.processInfo.environment)
        try run(
            "pg_ctl",
            ["-D", dataDirectory, "-l", directory + "/server.log", "-w", "-t", "60",
             "-o", settings.map { "-c \($0)" }.joined(separator: " "), "start"],
            what: "start the server"
        )
    }

    /// Stops the server as a crash would (`pg_ctl stop -m immediate`: no checkpoint, clients cut
    /// off), keeping its data, for tests of what survives. `restart()` brings it back.
    package func crash() throws {
        try run("pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "-t", "30", "stop"], what: "stop the server immediately")
    }

    /// Starts the server again on the same data directory, after `crash()`; it recovers from its WAL.
    package func restart() throws {
        try startServer()
    }

    /// Stops the server and deletes its directory. Safe to call more than once.
    package func stop() {
        let alreadyStopped = stopped.withLock { value in
            defer { value = true }
            return value
        }
        if alreadyStopped { return }
        if FileManager.default.fileExists(atPath: dataDirectory + "/postmaster.pid") {
            try? run("pg_ctl", ["-D", dataDirectory, "-m", "fast", "-w", "-t", "30", "stop"], what: "stop the server")
        }
        try? FileManager.default.removeItem(atPath: directory)
        logger.debug("throwaway PostgreSQL stopped and removed", metadata: ["directory": "\(directory)"])
    }

    deinit { stop() }

    // MARK: - Processes

    /// Runs a server binary, as the unprivileged user when we are root.
    private func run(_ tool: String, _ arguments: [String], what: String) throws {
        let completion: ChildProcess.Completion
        if let runAs {
            let runuser = try Self.which("runuser", in: ["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
            completion = try ChildProcess.run(runuser, ["-u", runAs, "--", "\(binaries)/\(tool)"] + arguments, directory: directory)
        } else {
            // The server user may not be able to enter the caller's working directory.
            completion = try ChildProcess.run("\(binaries)/\(tool)", arguments, directory: directory)
        }
        guard completion.status == 0 else {
            var detail = (completion.standardOutput + completion.standardError).split(separator: "\n").suffix(8).joined(separator: "\n")
            if let log = try? String(contentsOfFile: directory + "/server.log", encoding: .utf8) {
                detail += "\nserver log:\n" + log.split(separator: "\n").suffix(8).joined(separator: "\n")
            }
            throw ThrowawayPostgresError("could not \(what) (\(tool) exited with \(completion.status)):\n\(detail)")
        }
    }

    /// A detached shell, in a process group of its own, that waits for this process to end,
    /// then stops the server and removes the directory: the safety net for a crash, SIGKILL or
    /// Ctrl-C, when `stop()` never runs.
    private func startWatchdog() {
        let pgCtl = runAs.map { "runuser -u \($0) -- \(binaries)/pg_ctl" } ?? "\(binaries)/pg_ctl"
        let script = """
            trap '' INT TERM HUP
            while kill -0 \(getpid()) 2>/dev/null && [ -d '\(directory)' ]; do sleep 1; done
            if [ -f '\(dataDirectory)/postmaster.pid' ]; then \(pgCtl) -D '\(dataDirectory)' -m immediate -w stop >/dev/null 2>&1; fi
            rm -rf '\(directory)'
            """
        _ = try? ChildProcess.spawn("/bin/sh", ["-c", script], directory: "/")
    }

    // MARK: - Finding things

    /// The directory of `initdb` and `pg_ctl`: `$POSTGRES_BIN_DIR`, else the newest
    /// `/usr/lib/postgresql/N/bin` (Debian's layout), else wherever `PATH` has them.
    static func findServerBinaries() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let configured = environment["POSTGRES_BIN_DIR"] { candidates.append(configured) }
        let debian = "/usr/lib/postgresql"
        if let versions = try? FileManager.default.contentsOfDirectory(atPath: debian) {
            for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
                candidates.append("\(debian)/\(version)/bin")
            }
        }
        candidates += (environment["PATH"] ?? "").split(separator: ":").map(String.init)
        for candidate in candidates
        where FileManager.default.isExecutableFile(atPath: candidate + "/initdb")
            && FileManager.default.isExecutableFile(atPath: candidate + "/pg_ctl")
        {
            return candidate
        }
        throw ThrowawayPostgresError(
            "PostgreSQL server binaries (initdb, pg_ctl) were not found; install them with "
                + "'apt-get install postgresql' or set POSTGRES_BIN_DIR, or set DATABASE_URL to use a running server"
        )
    }

    private static func unprivilegedUser() throws -> String {
        for name in ["postgres", "nobody"] where getpwnam(name) != nil { return name }
        throw ThrowawayPostgresError("running as root, and neither a 'postgres' nor a 'nobody' user exists to run the server")
    }

    private static func which(_ tool: String, in directories: [String]) throws -> String {
        for directory in directories where FileManager.default.isExecutableFile(atPath: "\(directory)/\(tool)") {
            return "\(directory)/\(tool)"
        }
        throw ThrowawayPostgresError("\(tool) is needed to run PostgreSQL as an unprivileged user when root, and was not found")
    }
}

package struct ThrowawayPostgresError: Error, CustomStringConvertible, Sendable {
    package var description: String
    init(_ description: String) { self.description = description }
}

#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Ledger
import PostgresNIO
import TestSupport
import Testing
import ThrowawayPostgres

@Suite("Throwaway PostgreSQL cluster")
struct ThrowawayPostgresTests {
    /// PIDs of processes whose command line mentions `text` (the cluster's directory).
    static func processes(mentioning text: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry), pid != getpid(),
                let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
            else { return nil }
            let commandLine = String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
            return commandLine.contains(text) ? pid : nil
        }
    }

    /// Waits up to `seconds` for the directory and every process mentioning it to be gone.
    static func waitUntilGone(_ directory: String, seconds: Double = 10) async throws -> (directoryExists: Bool, processes: [Int32]) {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let exists = FileManager.default.fileExists(atPath: directory)
            let remaining = processes(mentioning: directory)
            if (!exists && remaining.isEmpty) || Date() > deadline { return (exists, remaining) }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    @Test func startsAcceptsConnectionsAndStopsLeavingNoProcessOrDirectory() async throws {
        let cluster = try ThrowawayPostgres.start()
        let directory = cluster.directory
        #expect(FileManager.default.fileExists(atPath: cluster.dataDirectory + "/PG_VERSION"))
        let answer = try await LedgerDatabase.withClient(try DatabaseURL(cluster.url()), logger: TestDatabase.logger) { client in
            let rows = try await client.query("SELECT 40 + 2")
            for try await value in rows.decode(Int.self) { return value }
            return 0
        }
        #expect(answer == 42)
        #expect(!Self.processes(mentioning: directory).isEmpty, "the server runs while started")
        cluster.stop()
        let (exists, remaining) = try await Self.waitUntilGone(directory)
        #expect(!exists, "the directory is deleted")
        #expect(remaining.isEmpty, "no server or watchdog process is left: \(remaining)")
    }

    @Test(.enabled(if: geteuid() == 0, "only root can show the server is not run as root"))
    func whenStartedByRootTheServerRunsAsAnUnprivilegedUser() async throws {
        let cluster = try ThrowawayPostgres.start()
        defer { cluster.stop() }
        let pidFile = try String(contentsOfFile: cluster.dataDirectory + "/postmaster.pid", encoding: .utf8)
        let pid = try #require(pidFile.split(separator: "\n").first.map(String.init))
        var info = stat()
        #expect(stat("/proc/\(pid)", &info) == 0)
        #expect(info.st_uid != 0, "the postmaster runs as uid \(info.st_uid)")
    }

    @Test(.enabled(if: geteuid() == 0 && getpwnam("nobody") != nil, "needs root to switch to a non-root user"))
    func asANonRootUserTheDemoStartsItsOwnClusterAndLeavesNothingBehind() async throws {
        let reports = "/tmp/appstore-reconcile-demo-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let result = try await BuiltBinary.run(["demo", "--customers", "12", "--report-dir", reports], user: "nobody", binary: BuiltBinary.devPath)
        #expect(result.exitCode == 0, "demo as nobody: \(result.combined)")
        #expect(result.standardOutput.contains("Created the ledger schema"))
        let line = try #require(result.standardOutput.split(separator: "\n").first { $0.contains("running in ") })
        let directory = String(try #require(line.split(separator: " ").first { $0.hasPrefix("/") }))
        let (exists, remaining) = try await Self.waitUntilGone(directory)
        #expect(!exists)
        #expect(remaining.isEmpty, "left running: \(remaining)")
    }

    @Test func aKilledOwnerStillLeavesNoProcessOrDirectoryBehind() async throws {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        let child = try ChildProcess.spawn(
            BuiltBinary.devPath, ["throwaway-postgres"], environment: BuiltBinary.environment([:]), standardOutput: descriptors[1]
        )
        close(descriptors[1])
        // Read until the directory line has arrived.
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(30)
        while !text.contains("directory: ") || !text.hasSuffix("\n"), Date() < deadline {
            let count = buffer.withUnsafeMutableBytes { read(descriptors[0], $0.baseAddress, $0.count) }
            if count <= 0 { break }
            text += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        close(descriptors[0])
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("directory: ") })
        let directory = String(line.dropFirst("directory: ".count))
        #expect(FileManager.default.fileExists(atPath: directory))

        child.send(SIGKILL)
        #expect(child.wait() == 128 + SIGKILL)
        let (exists, remaining) = try await Self.waitUntilGone(directory, seconds: 15)
        #expect(!exists, "the watchdog deleted the directory")
        #expect(remaining.isEmpty, "the watchdog stopped the server: \(remaining)")
    }
}

import Foundation
package import ThrowawayPostgres

/// Runs the built `appstore-reconcile` executable (or `appstore-reconcile-dev`: `demo`,
/// `simulate`, `throwaway-postgres`), as a user would, and captures what it says.
package enum BuiltBinary {
    package typealias Result = ChildProcess.Completion

    /// The deployed executable, beside the test bundle in the build directory.
    package static var path: String { executable("appstore-reconcile") }

    /// The companion with the simulator and the throwaway PostgreSQL.
    package static var devPath: String { executable("appstore-reconcile-dev") }

    /// The directory of the executables under test when not beside the test bundle: set to the
    /// release build's (`swift build -c release --show-bin-path`), the binary teams deploy, by
    /// `scripts/test` for its second pass over the end-to-end command tests.
    package static let directoryVariable = "APPSTORE_RECONCILE_TEST_BINARIES"

    static func executable(_ name: String) -> String {
        if let directory = ProcessInfo.processInfo.environment[directoryVariable], !directory.isEmpty {
            return URL(fileURLWithPath: directory).appendingPathComponent(name).path
        }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return name
    }

    /// The environment the binary runs with: this process's, without any configuration
    /// variable (APPSTORE_*, DATABASE_URL), plus `overrides`.
    package static func environment(_ overrides: [String: String]) -> [String: String] {
        var merged = ProcessInfo.processInfo.environment.filter { key, _ in
            !key.hasPrefix("APPSTORE_") && key != "DATABASE_URL"
        }
        for (key, value) in overrides { merged[key] = value }
        return merged
    }

    /// Runs the binary to its end, waiting on a thread of its own: a test that serves the
    /// simulator in-process must not block the concurrency pool the simulator answers from.
    /// - Parameter user: when running as root, run as this user instead (through runuser).
    /// - Parameter binary: `path` (the default) or `devPath`.
    package static func run(
        _ arguments: [String], environment overrides: [String: String] = [:], standardInput: String? = nil,
        user: String? = nil, binary: String = path
    ) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Swift.Result { try runBlocking(arguments, environment: overrides, standardInput: standardInput, user: user, binary: binary) })
            }
            thread.start()
        }
    }

    static func runBlocking(
        _ arguments: [String], environment overrides: [String: String], standardInput: String?, user: String?, binary: String
    ) throws -> Result {
        if let user {
            return try ChildProcess.run(
                "/usr/sbin/runuser", ["-u", user, "--", binary] + arguments, environment: environment(overrides),
                directory: "/tmp", input: standardInput
            )
        }
        return try ChildProcess.run(binary, arguments, environment: environment(overrides), input: standardInput)
    }
}

extension ChildProcess.Completion {
    package var exitCode: Int32 { status }
    package var combined: String { standardOutput + standardError }
}

extension BuiltBinary {
    /// Starts the binary without waiting for it (output discarded), for tests that signal it.
    package static func start(_ arguments: [String], environment overrides: [String: String] = [:]) throws -> ChildProcess {
        try ChildProcess.spawn(path, arguments, environment: environment(overrides))
    }
}

extension ChildProcess {
    /// Waits for the child on a thread of its own, off the concurrency pool.
    package func waitAsync() async -> Int32 {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.wait()) }.start()
        }
    }
}

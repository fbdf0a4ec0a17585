#if canImport(Glibc)
package import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// Starting and waiting for child processes with posix_spawn and waitpid, which behave the
/// same on every thread; Foundation's `Process.waitUntilExit` can miss a quick child's exit
/// when called from a task.
package struct ChildProcess: Sendable {
    package let pid: pid_t

    /// What a finished child printed and how it ended.
    package struct Completion: Sendable {
        package var status: Int32
        package var standardOutput: String
        package var standardError: String
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: AddCloseFrom.self)
    }

    /// Starts `executable` with its standard output and error going to the given descriptors
    /// (or /dev/null), standard input from `standardInput` (or /dev/null).
    package static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
        standardInput: Int32? = nil, standardOutput: Int32? = nil, standardError: Int32? = nil,
        closingInChild: [Int32] = []
    ) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let standardInput { posix_spawn_file_actions_adddup2(&actions, standardInput, 0) }
        else { posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0) }
        if let standardOutput { posix_spawn_file_actions_adddup2(&actions, standardOutput, 1) }
        else { posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0) }
        if let standardError { posix_spawn_file_actions_adddup2(&actions, standardError, 2) }
        else { posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) }
        for descriptor in closingInChild { posix_spawn_file_actions_addclose(&actions, descriptor) }
        // Nothing else of ours reaches the child: a socket of ours it held (a PostgreSQL server
        // started while an HTTP client had connections open) would never be seen closed by its peer.
        // (glibc 2.34's posix_spawn_file_actions_addclosefrom_np, which Swift's Glibc module omits.)
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A fresh process group: a terminal's Ctrl-C then reaches only us, and we decide.
        // And no blocked signals: the thread that spawns may have some blocked, and a child
        // inheriting that mask never sees them (gunicorn ignored SIGTERM and SIGQUIT so).
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK))
        posix_spawnattr_setpgroup(&attributes, 0)
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)

        let environmentPairs = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        // posix_spawn has no portable "change directory" action: a shell does the `cd`, with the
        // directory and command passed as arguments, never spliced into the script.
        let command = directory.map { ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", $0, executable] } ?? [executable]
        let argv = (command + arguments).map { strdup($0) } + [nil]
        let envp = environmentPairs.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = spawnLock.withLock { _ in posix_spawn(&pid, command[0], &actions, &attributes, argv, envp) }
        guard result == 0 else {
            throw ChildProcessError("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        return ChildProcess(pid: pid)
    }

    /// Runs a child to its end, collecting what it prints.
    package static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
        input: String? = nil
    ) throws -> Completion {
        let output = try Pipe2()
        let errors = try Pipe2()
        let inputPipe = try input.map { _ in try Pipe2() }
        let child = try spawn(
            executable, arguments, environment: environment, directory: directory,
            standardInput: inputPipe?.read, standardOutput: output.write, standardError: errors.write,
            closingInChild: [output.read, errors.read] + (inputPipe.map { [$0.write] } ?? [])
        )
        close(output.write)
        close(errors.write)
        if let inputPipe, let input {
            close(inputPipe.read)
            let bytes = Array(input.utf8)
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { write(inputPipe.write, $0.baseAddress, $0.count) }
                if written <= 0 { break }
                offset += written
            }
            close(inputPipe.write)
        }
        let (standardOutput, standardError) = drain(output.read, errors.read)
        let status = child.wait()
        return Completion(status: status, standardOutput: standardOutput, standardError: standardError)
    }

    /// Waits for the child to end; its exit code, or 128 + the signal that ended it.
    @discardableResult
    package func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }

    /// Waits for the child to end; its exit code (as `wait()`), the CPU seconds it used (user and
    /// system) and its peak resident memory in bytes, as the kernel accounted them.
    package func waitWithUsage() -> (status: Int32, cpuSeconds: Double, peakResidentBytes: Int) {
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) == -1 && errno == EINTR {}
        let signal = status & 0x7F
        let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        return (signal == 0 ? (status >> 8) & 0xFF : 128 + signal, cpu, Int(usage.ru_maxrss) * 1024)
    }

    package func send(_ signal: Int32) {
        kill(pid, signal)
    }

    /// Reads two descriptors to their ends at once, so neither pipe fills and blocks the child.
    private static func drain(_ first: Int32, _ second: Int32) -> (String, String) {
        var buffers: [[UInt8]] = [[], []]
        var descriptors = [pollfd(fd: first, events: Int16(POLLIN), revents: 0), pollfd(fd: second, events: Int16(POLLIN), revents: 0)]
        var open = 2
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while open > 0 {
            if poll(&descriptors, nfds_t(descriptors.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            for index in descriptors.indices where descriptors[index].fd >= 0 && descriptors[index].revents != 0 {
                let count = chunk.withUnsafeMutableBytes { read(descriptors[index].fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    buffers[index].append(contentsOf: chunk[0..<count])
                } else if count == 0 || errno != EINTR {
                    close(descriptors[index].fd)
                    descriptors[index].fd = -1
                    open -= 1
                }
            }
        }
        return (String(decoding: buffers[0], as: UTF8.self), String(decoding: buffers[1], as: UTF8.self))
    }
}

/// Held while a pipe is created and marked close-on-exec, and while a child is spawned, so that
/// no child of ours inherits another's pipe (which would keep it open and block its reader).
private let spawnLock = Mutex<Void>(())

/// A pipe's two descriptors.
struct Pipe2 {
    let read: Int32
    let write: Int32

    init() throws {
        var descriptors: [Int32] = [0, 0]
        // Close-on-exec: no other child started meanwhile may hold our ends open.
        let created = spawnLock.withLock { _ in
            guard pipe(&descriptors) == 0 else { return false }
            _ = fcntl(descriptors[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(descriptors[1], F_SETFD, FD_CLOEXEC)
            return true
        }
        guard created else {
            throw ChildProcessError("cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        read = descriptors[0]
        write = descriptors[1]
    }
}

package struct ChildProcessError: Error, CustomStringConvertible, Sendable {
    package var description: String
    init(_ description: String) { self.description = description }
}

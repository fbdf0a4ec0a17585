import Foundation
import Reconciliation

#if canImport(Glibc)
import Glibc
#endif

/// The command line's sink for a run's progress (`RunProgress`), on standard error: one live
/// line on a terminal, a plain line every ten seconds otherwise (cron logs, CI).
package final class ProgressLine: RunProgress, @unchecked Sendable {
    private let isTerminal: Bool
    private let enabled: Bool
    private let lock = NSLock()
    private var lastPlain = Date.distantPast
    private let started = Date()

    private let writeLine: @Sendable (String) -> Void

    /// - Parameter writeLine: how a plain line (not a terminal) is written: the command line
    ///   tool passes its operator-message writer, which emits JSON when logs are JSON.
    package init(enabled: Bool = true, writeLine: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }) {
        self.enabled = enabled
        self.isTerminal = isatty(STDERR_FILENO) == 1
        self.writeLine = writeLine
    }

    /// Shows the current state; `requests` drives the rate.
    package func update(_ text: String, requests: Int) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        let elapsed = max(Date().timeIntervalSince(started), 0.001)
        let line = "\(text) · \(String(format: "%.1f", Double(requests) / elapsed)) requests/s"
        if isTerminal {
            FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
        } else if Date().timeIntervalSince(lastPlain) >= 10 {
            lastPlain = Date()
            writeLine(line)
        }
    }

    package func finish() {
        guard enabled, isTerminal else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}

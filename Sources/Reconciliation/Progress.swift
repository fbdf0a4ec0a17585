import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Progress of a long run on standard error: one live line on a terminal, a plain line every
/// few pages otherwise (cron logs, CI).
public final class ProgressLine: @unchecked Sendable {
    private let isTerminal: Bool
    private let enabled: Bool
    private let lock = NSLock()
    private var lastPlain = Date.distantPast
    private let started = Date()

    public init(enabled: Bool = true) {
        self.enabled = enabled
        self.isTerminal = isatty(STDERR_FILENO) == 1
    }

    /// Shows the current state; `requests` drives the rate.
    public func update(_ text: String, requests: Int) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        let elapsed = max(Date().timeIntervalSince(started), 0.001)
        let line = "\(text) · \(String(format: "%.1f", Double(requests) / elapsed)) requests/s"
        if isTerminal {
            FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
        } else if Date().timeIntervalSince(lastPlain) >= 10 {
            lastPlain = Date()
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }

    public func finish() {
        guard enabled, isTerminal else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}

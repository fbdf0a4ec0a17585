import Reconciliation
import Synchronization

/// The deadlines of `NotificationReceiver.within`, kept by one task that looks at them every
/// `interval`, rather than by a timer per call. Under `serve`'s load a timer per POST was a
/// sleeping task, a dispatch timer and an eventfd write each time (about 2% of the machine's CPU
/// at 2,000 notifications/s, perf). A deadline fires up to one `interval` late, which is nothing
/// against the seconds these deadlines are. The sweeping task ends when no deadline is left and
/// starts again with the next one.
package final class DeadlineSweeper: Sendable {
    package static let shared = DeadlineSweeper(interval: .milliseconds(50))

    package struct Ticket: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    private struct Entry {
        let due: ContinuousClock.Instant
        let expire: @Sendable () -> Void
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var lastId: UInt64 = 0
        var sweeping = false
    }

    package let interval: Duration
    private let state = Mutex(State())

    package init(interval: Duration) {
        self.interval = interval
    }

    /// Calls `expire` once `due` has passed, unless `cancel` is called with the ticket first.
    package func add(due: ContinuousClock.Instant, expire: @escaping @Sendable () -> Void) -> Ticket {
        let (id, start) = state.withLock { state -> (UInt64, Bool) in
            state.lastId += 1
            state.entries[state.lastId] = Entry(due: due, expire: expire)
            defer { state.sweeping = true }
            return (state.lastId, !state.sweeping)
        }
        if start { Task { await self.sweep() } }
        return Ticket(id: id)
    }

    package func cancel(_ ticket: Ticket) {
        state.withLock { _ = $0.entries.removeValue(forKey: ticket.id) }
    }

    /// How many deadlines are waiting (for tests).
    package var waiting: Int { state.withLock { $0.entries.count } }

    private func sweep() async {
        while true {
            try? await Task.sleep(for: interval)
            let now = ContinuousClock.now
            let (expired, done) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
                let due = state.entries.filter { $0.value.due <= now }
                for id in due.keys { state.entries.removeValue(forKey: id) }
                if state.entries.isEmpty { state.sweeping = false }
                return (due.values.map(\.expire), !state.sweeping)
            }
            expired.forEach { $0() }
            if done { return }
        }
    }
}

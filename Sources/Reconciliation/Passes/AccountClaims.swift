import Synchronization

/// Which target of a pass an account's transactions belong to, while it is asked about: two
/// targets of one account that the ledger did not know (two lines of an import naming the same
/// customer by different transaction IDs) are both in flight before either is written. The first
/// whose history page comes back claims the account's transaction IDs; the other sees them claimed
/// and stops there, having spent one page. Memory stays bounded: a target's IDs are forgotten once
/// `remembered` targets have finished after it, by when every target in flight beside it has
/// finished too and the ledger answers for it (`CustomerRepair.reorderLimit` and the concurrency
/// bound how many can be in flight at once).
package final class AccountClaims: Sendable {
    private struct State {
        var owners: [String: Int] = [:]
        var claimed: [Int: [String]] = [:]
        var finished: [Int] = []
        var head = 0
    }

    private let state = Mutex(State())
    private let remembered: Int

    package init(remembered: Int = 2 * CustomerRepair.reorderLimit) {
        self.remembered = remembered
    }

    /// Claims `ids` for target `owner`; false when another target claimed any of them first.
    func claim(_ ids: [String], owner: Int) -> Bool {
        state.withLock { state in
            if ids.contains(where: { state.owners[$0].map { $0 != owner } ?? false }) { return false }
            for id in ids { state.owners[id] = owner }
            state.claimed[owner, default: []] += ids
            return true
        }
    }

    /// Target `owner` finished (in target order); the oldest finished targets' claims are dropped.
    func finished(_ owner: Int) {
        state.withLock { state in
            state.finished.append(owner)
            while state.finished.count - state.head > remembered {
                let oldest = state.finished[state.head]
                state.head += 1
                for id in state.claimed.removeValue(forKey: oldest) ?? [] where state.owners[id] == oldest { state.owners[id] = nil }
            }
            if state.head > 4096 {
                state.finished.removeFirst(state.head)
                state.head = 0
            }
        }
    }

    /// IDs claimed now (for tests: stays bounded).
    var count: Int { state.withLock { $0.owners.count } }
}

package import Decisions
import Foundation
package import Reconciliation
import Ledger
import ServiceLifecycle
package import SignedData
import Synchronization

/// `serve`'s path to the ledger under load: each request verifies its own payload (in parallel,
/// no database), then waits while a writer records it together with whatever else arrived
/// meanwhile, in one transaction (`NotificationIngest.ingest(verified:)`), and gets its own
/// outcome after that commit. One transaction per notification made the change feed's
/// commit-order lock and the commit itself the limit; shared, they cost once per batch.
///
/// Bounded for the open internet (`Limits`): the queue holds at most so many notifications and
/// bytes, and one more is refused at once (`Overloaded`: 503 with Retry-After). A notification
/// is taken by a writer only while there is time left to write it before its request must be
/// answered; after that, or when its request is given up (cancelled), it leaves the queue
/// unwritten: a request answered 503 is never written later. A batch's statements are bounded
/// by the serving pool's `statement_timeout` (`Limits.write`), lock waits included.
package final class BatchedIngest: Service, Sendable {
    package struct Limits: Sendable {
        /// Notifications waiting for a writer, at most.
        package var queuedNotifications = 1_000
        /// Bytes of their signed payloads, at most.
        package var queuedBytes = 32 * 1024 * 1024
        /// How long a notification may wait for a writer.
        package var wait: Duration = .seconds(4)
        /// How long a batch's statements may run: `serve` sets it as its pool's statement_timeout.
        package var write: Duration = .seconds(4)

        package init() {}
    }

    private struct Waiting: Sendable {
        var id: UInt64
        /// The App Store it is recorded under: a batch holds one App Store's notifications.
        var pair: AppStorePair
        var input: RecoveryPlanner.Input
        var bytes: Int
        /// Taken by a writer only before this instant.
        var due: ContinuousClock.Instant
        var continuation: CheckedContinuation<NotificationIngest.Outcome, any Error>
    }

    /// Not recorded, and never will be: the writers are stopping, or its time ran out first.
    package struct GivenUp: Error {}
    /// Not queued: the queue is full.
    package struct Overloaded: Error {}

    /// The first App Store's ingest (the only one, but for a `serve` of several apps).
    package let ingest: NotificationIngest
    /// Every App Store's ingest: one queue, its bounds shared, and batches of one App Store each.
    package let ingests: [AppStorePair: NotificationIngest]
    package let maximumBatch: Int
    package let writers: Int
    package let limits: Limits
    private struct Queue {
        var waiting: [Waiting] = []
        var bytes = 0
        var nextId: UInt64 = 0
        /// The writers are done: what comes now is refused at once.
        var closed = false
    }

    private enum Admission {
        case queued, full, closed
    }

    private let queue = Mutex(Queue())
    private let wakes: AsyncStream<Void>
    private let waker: AsyncStream<Void>.Continuation

    /// Three writers of at most 100 each: while one commits, another's rows are being written and
    /// a third batch fills, so the database and the verification overlap. Against two writers of
    /// at most 200, in alternating runs of `reconcile-benchmark`'s serve part at 256 connections:
    /// 2,392, 2,380, 2,576 and 2,296 notifications/s against 2,225, 2,129, 2,438 and 2,302.
    package convenience init(ingest: NotificationIngest, maximumBatch: Int = 100, writers: Int = 3, limits: Limits = Limits()) {
        self.init(ingests: [ingest], maximumBatch: maximumBatch, writers: writers, limits: limits)
    }

    /// The writers of several App Stores' notifications (`ingests`, at least one, each of its own
    /// App Store): one queue within one set of `limits`, whatever the number of apps.
    package init(ingests: [NotificationIngest], maximumBatch: Int = 100, writers: Int = 3, limits: Limits = Limits()) {
        precondition(!ingests.isEmpty, "BatchedIngest needs an App Store to record")
        self.ingest = ingests[0]
        self.ingests = Dictionary(ingests.map { ($0.verifier.configuration.pair, $0) }, uniquingKeysWith: { first, _ in first })
        self.maximumBatch = max(1, maximumBatch)
        self.writers = max(1, writers)
        self.limits = limits
        (wakes, waker) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// How many notifications wait for a writer now, and their bytes.
    package var queued: (notifications: Int, bytes: Int) { queue.withLock { ($0.waiting.count, $0.bytes) } }

    /// Verifies `signedPayload`, records it with the others waiting, returns its outcome; the
    /// request must be answered by `answerBy`. Throws `Overloaded` when the queue is full,
    /// `GivenUp` when there is no time left to write it, `CancellationError` when the caller gave up.
    package func ingest(signedPayload: String, answerBy: ContinuousClock.Instant) async throws -> NotificationIngest.Outcome {
        try await ingest(verified: await ingest.verify(signedPayload), of: ingest.verifier.configuration.pair, bytes: signedPayload.utf8.count, answerBy: answerBy)
    }

    /// Records a payload already verified by `pair`'s verifier (`bytes` long) with the others
    /// waiting; as `ingest(signedPayload:answerBy:)`.
    package func ingest(
        verified input: RecoveryPlanner.Input, of pair: AppStorePair, bytes: Int, answerBy: ContinuousClock.Instant
    ) async throws -> NotificationIngest.Outcome {
        precondition(ingests[pair] != nil, "\(pair) is not an App Store of this BatchedIngest")
        try Task.checkCancellation()
        // Taken no later than what leaves a batch its whole statement time, and half a second to spare.
        let due = min(ContinuousClock.now + limits.wait, answerBy - limits.write - .milliseconds(500))
        guard due > .now else { throw GivenUp() }
        let id = queue.withLock { queue in
            defer { queue.nextId += 1 }
            return queue.nextId
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let admission = queue.withLock { queue -> Admission in
                    guard !queue.closed else { return .closed }
                    guard queue.waiting.count < limits.queuedNotifications, queue.bytes + bytes <= limits.queuedBytes else { return .full }
                    queue.waiting.append(Waiting(id: id, pair: pair, input: input, bytes: bytes, due: due, continuation: continuation))
                    queue.bytes += bytes
                    return .queued
                }
                switch admission {
                case .queued: waker.yield()
                case .full: continuation.resume(throwing: Overloaded())
                case .closed: continuation.resume(throwing: GivenUp())
                }
            }
        } onCancel: {
            // Still queued: it leaves unwritten. Taken: its batch ends within the statement time.
            let removed = queue.withLock { queue -> Waiting? in
                guard let index = queue.waiting.firstIndex(where: { $0.id == id }) else { return nil }
                let waiting = queue.waiting.remove(at: index)
                queue.bytes -= waiting.bytes
                return waiting
            }
            removed?.continuation.resume(throwing: CancellationError())
        }
    }

    /// The writers, until the graceful shutdown; what is queued then is still written.
    package func run() async {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for _ in 0..<writers {
                    group.addTask { await self.write() }
                }
            }
        } onGracefulShutdown: {
            self.waker.finish()
        }
        // Anything that came after the writers stopped; then nothing more is taken.
        await writeQueued()
        let late = queue.withLock { queue in
            queue.closed = true
            queue.bytes = 0
            defer { queue.waiting = [] }
            return queue.waiting
        }
        late.forEach { $0.continuation.resume(throwing: GivenUp()) }
    }

    private func write() async {
        for await _ in wakes {
            await writeQueued()
        }
    }

    private func writeQueued() async {
        while true {
            let now = ContinuousClock.now
            let (batch, expired, more) = queue.withLock { queue -> ([Waiting], [Waiting], Bool) in
                var expired: [Waiting] = []
                queue.waiting.removeAll { waiting in
                    guard waiting.due <= now else { return false }
                    expired.append(waiting)
                    return true
                }
                // The oldest's App Store, and as many more of it as a batch holds, in their order.
                var taken: [Waiting] = []
                if ingests.count == 1 {
                    taken = Array(queue.waiting.prefix(maximumBatch))
                    queue.waiting.removeFirst(taken.count)
                } else if let pair = queue.waiting.first?.pair {
                    var kept: [Waiting] = []
                    kept.reserveCapacity(queue.waiting.count)
                    for waiting in queue.waiting {
                        if waiting.pair == pair && taken.count < maximumBatch { taken.append(waiting) } else { kept.append(waiting) }
                    }
                    queue.waiting = kept
                }
                queue.bytes -= (expired + taken).reduce(0) { $0 + $1.bytes }
                return (taken, expired, !queue.waiting.isEmpty)
            }
            expired.forEach { $0.continuation.resume(throwing: GivenUp()) }
            guard !batch.isEmpty else { return }
            // More is queued: another writer may take it while this one writes.
            if more { waker.yield() }
            do {
                guard let outcomes = try await record(batch) else {
                    batch.forEach { $0.continuation.resume(throwing: GivenUp()) }
                    continue
                }
                for (waiting, outcome) in zip(batch, outcomes) { waiting.continuation.resume(returning: outcome) }
            } catch where batch.count > 1 && Self.isAboutTheInput(error) {
                // One input the database refuses must not fail the others: each on its own, while
                // there is time. (A timeout or a lost connection fails them all: one by one, each
                // would wait as long again.)
                for waiting in batch {
                    do {
                        guard waiting.due > .now, let outcome = try await record([waiting])?.first else { throw GivenUp() }
                        waiting.continuation.resume(returning: outcome)
                    } catch {
                        waiting.continuation.resume(throwing: error)
                    }
                }
            } catch {
                batch.forEach { $0.continuation.resume(throwing: error) }
            }
        }
    }

    /// Whether the database refused what a batch holds, not the batch's circumstances (a
    /// timeout, a lock, a lost connection).
    static func isAboutTheInput(_ error: any Error) -> Bool {
        LedgerFailure(error)?.kind == .refusedInput
    }

    /// The batch's outcomes, in its order; nil when no answer came in time. Nothing commits
    /// after that: each statement is ended by the server's statement_timeout, and a transaction
    /// whose statements end later than `limits.write` after it was taken is rolled back before
    /// its COMMIT. That leaves the COMMIT a second before this gives up, and at least half a
    /// second before any of the batch's requests is answered 503 (each was taken by its `due`,
    /// which is its deadline less `limits.write` and half a second).
    private func record(_ batch: [Waiting]) async throws -> [NotificationIngest.Outcome]? {
        // Never an empty batch nor an App Store not given at init (`ingest(verified:of:…)` checks).
        guard let ingest = batch.first.flatMap({ ingests[$0.pair] }) else { return nil }
        let inputs = batch.map(\.input)
        let commitBy = ContinuousClock.now + limits.write
        return try await NotificationReceiver.within(limits.write + .seconds(1)) { try await ingest.ingest(verified: inputs, commitBy: commitBy) }
    }
}

import Foundation
import Ledger
import ServiceLifecycle
import Synchronization

/// `serve`'s path to the ledger under load: each request verifies its own payload (in parallel,
/// no database), then waits while a writer records it together with whatever else arrived
/// meanwhile, in one transaction (`NotificationIngest.ingest(verified:)`), and gets its own
/// outcome after that commit. One transaction per notification made the change feed's
/// commit-order lock and the commit itself the limit; shared, they cost once per batch. A
/// batch that takes longer than `deadline` is given up: its requests fail (503, Apple retries)
/// and the writer goes on with the next, so a query that never ends cannot stop the receiver.
package final class BatchedIngest: Service, Sendable {
    private struct Waiting: Sendable {
        var input: RecoveryPlanner.Input
        var continuation: CheckedContinuation<NotificationIngest.Outcome, any Error>
    }

    package struct GivenUp: Error {}

    package let ingest: NotificationIngest
    package let maximumBatch: Int
    package let writers: Int
    package let deadline: Duration
    private struct Queue {
        var waiting: [Waiting] = []
        /// The writers are done: what comes now is refused at once.
        var closed = false
    }

    private let queue = Mutex(Queue())
    private let wakes: AsyncStream<Void>
    private let waker: AsyncStream<Void>.Continuation

    /// Three writers of at most 100 each: while one commits, another's rows are being written and
    /// a third batch fills, so the database and the verification overlap. Against two writers of
    /// at most 200, in alternating runs of `reconcile-benchmark`'s serve part at 256 connections:
    /// 2,392, 2,380, 2,576 and 2,296 notifications/s against 2,225, 2,129, 2,438 and 2,302.
    package init(ingest: NotificationIngest, maximumBatch: Int = 100, writers: Int = 3, deadline: Duration = .seconds(10)) {
        self.ingest = ingest
        self.maximumBatch = max(1, maximumBatch)
        self.writers = max(1, writers)
        self.deadline = deadline
        (wakes, waker) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Verifies `signedPayload`, records it with the others waiting, returns its outcome.
    package func ingest(signedPayload: String) async throws -> NotificationIngest.Outcome {
        let input = await ingest.verify(signedPayload)
        return try await withCheckedThrowingContinuation { continuation in
            let accepted = queue.withLock { queue in
                if !queue.closed { queue.waiting.append(Waiting(input: input, continuation: continuation)) }
                return !queue.closed
            }
            if accepted { waker.yield() } else { continuation.resume(throwing: GivenUp()) }
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
            let (batch, more) = queue.withLock { queue -> ([Waiting], Bool) in
                let taken = Array(queue.waiting.prefix(maximumBatch))
                queue.waiting.removeFirst(taken.count)
                return (taken, !queue.waiting.isEmpty)
            }
            guard !batch.isEmpty else { return }
            // More is queued: another writer may take it while this one writes.
            if more { waker.yield() }
            do {
                guard let outcomes = try await record(batch) else {
                    batch.forEach { $0.continuation.resume(throwing: GivenUp()) }
                    continue
                }
                for (waiting, outcome) in zip(batch, outcomes) { waiting.continuation.resume(returning: outcome) }
            } catch where batch.count > 1 {
                // One input the database refuses must not fail the others: each on its own.
                for waiting in batch {
                    do {
                        guard let outcome = try await record([waiting])?.first else { throw GivenUp() }
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

    /// The batch's outcomes, in its order; nil when it took longer than the deadline.
    private func record(_ batch: [Waiting]) async throws -> [NotificationIngest.Outcome]? {
        let ingest = self.ingest
        let inputs = batch.map(\.input)
        return try await NotificationReceiver.within(deadline) { try await ingest.ingest(verified: inputs) }
    }
}

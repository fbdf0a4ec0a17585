import LiveReceiver
import Reconciliation
import Synchronization
import Testing

/// `NotificationReceiver.within`, `serve`'s bound on how long an answer may take, with its
/// deadlines kept by a `DeadlineSweeper` rather than a timer per call.
@Suite("Deadlines of serve's answers")
struct DeadlineTests {
    @Test func anOperationPastItsDeadlineIsGivenUpAndCancelledWhileAFastOneKeepsItsValueOrError() async throws {
        let sweeper = DeadlineSweeper(interval: .milliseconds(20))
        let cancelled = Mutex(false)
        let started = ContinuousClock.now
        // The operation would take ten minutes: nil proves it was given up at its deadline. (How
        // soon is not checked: under the whole suite's load, a 2-core machine's cooperative
        // threads were seen busy for 20 s at a time.)
        let slow = try await NotificationReceiver.within(.milliseconds(200), sweeper: sweeper) { () async throws -> Int in
            do {
                try await Task.sleep(for: .seconds(600))
            } catch {
                cancelled.withLock { $0 = true }
                throw error
            }
            return 1
        }
        #expect(slow == nil, "given up at its deadline, not when the operation ended")
        #expect(ContinuousClock.now - started < .seconds(300))
        for _ in 0..<3_000 where !cancelled.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(cancelled.withLock { $0 }, "the operation given up is cancelled")

        #expect(try await NotificationReceiver.within(.seconds(5), sweeper: sweeper) { 42 } == 42)
        struct Refused: Error {}
        await #expect(throws: Refused.self) { _ = try await NotificationReceiver.within(.seconds(5), sweeper: sweeper) { () async throws -> Int in throw Refused() } }
        #expect(sweeper.waiting == 0, "a call that ends takes its deadline with it")
    }

    @Test func manyConcurrentCallsEachGetTheirOwnAnswerAndLeaveNoDeadlineBehind() async throws {
        let sweeper = DeadlineSweeper(interval: .milliseconds(20))
        let answers = try await withThrowingTaskGroup(of: (Int, Int?).self) { group in
            for index in 0..<2_000 {
                group.addTask {
                    // Every tenth outlives its deadline; the others have ten minutes (a loaded CI
                    // machine was seen to keep them waiting for more than 5 s).
                    let answer = try await NotificationReceiver.within(.milliseconds(index % 10 == 0 ? 50 : 600_000), sweeper: sweeper) { () async throws -> Int in
                        try await Task.sleep(for: .milliseconds(index % 10 == 0 ? 600_000 : index % 7))
                        return index
                    }
                    return (index, answer)
                }
            }
            return try await group.reduce(into: [Int: Int?]()) { $0[$1.0] = $1.1 }
        }
        #expect(answers.filter { $0.key % 10 == 0 }.allSatisfy { $0.value == nil })
        #expect(answers.filter { $0.key % 10 != 0 }.allSatisfy { $0.value == $0.key })
        #expect(sweeper.waiting == 0)
    }
}

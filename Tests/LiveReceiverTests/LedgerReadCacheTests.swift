import Foundation
import Ledger
import LiveReceiver
import SignedData
import Synchronization
import Testing

/// /metrics and /healthz are reachable by whoever reaches the port: their reads of the ledger are
/// bounded to one per interval, however many ask, and one per retry interval while it fails.
@Suite("serve's public reads of the ledger, at most once per interval")
struct LedgerReadCacheTests {
    @Test func scrapesWithinTheIntervalShareOneReadAndALaterOneReadsAgain() async {
        let cache = LedgerGaugeCache(interval: .seconds(10))
        let reads = Mutex(0)
        let start = ContinuousClock.now
        let read: @Sendable () async -> LedgerGauges? = {
            let count = reads.withLock { $0 += 1; return $0 }
            return LedgerGauges().withCount(count)
        }
        let first = await cache.value(now: start, read: read)
        for second in 1..<100 { _ = await cache.value(now: start + .milliseconds(second * 90), read: read) }
        #expect(reads.withLock { $0 } == 1, "a hundred scrapes within 10 s: one read")
        #expect(first?.count == 1)
        let later = await cache.value(now: start + .seconds(10), read: read)
        #expect(reads.withLock { $0 } == 2)
        #expect(later?.count == 2)
    }

    @Test func aScrapeWhileAReadRunsGetsTheLastFiguresWithoutReading() async {
        let cache = LedgerGaugeCache(interval: .zero)
        let reads = Mutex(0)
        let (entered, enter) = AsyncStream.makeStream(of: Void.self)
        let (released, release) = AsyncStream.makeStream(of: Void.self)
        let slow: @Sendable () async -> LedgerGauges? = {
            reads.withLock { $0 += 1 }
            enter.yield()
            for await _ in released { break }
            return LedgerGauges().withCount(1)
        }
        async let running = cache.value(read: slow)
        for await _ in entered { break }
        let during = await cache.value { reads.withLock { $0 += 1 }; return LedgerGauges().withCount(9) }
        #expect(during == nil, "nothing read yet: left out, not read a second time")
        release.yield()
        #expect(await running?.count == 1)
        #expect(reads.withLock { $0 } == 1)
    }

    @Test func aFailedReadIsKeptOnlyForTheRetryIntervalSoAnOutageCostsOneReadPerRetryInterval() async {
        let cache = LedgerReadCache<Int>(interval: .seconds(3600), retryAfterFailure: .seconds(1))
        let reads = Mutex(0)
        let answering = Mutex(false)
        let read: @Sendable () async -> Int? = {
            reads.withLock { $0 += 1 }
            return answering.withLock { $0 } ? 7 : nil
        }
        let start = ContinuousClock.now
        #expect(await cache.value(now: start, read: read) == nil)
        for milliseconds in stride(from: 50, to: 1000, by: 50) {
            #expect(await cache.value(now: start + .milliseconds(milliseconds), read: read) == nil)
        }
        #expect(reads.withLock { $0 } == 1, "the database not answering: one read in that second, however many asked")
        answering.withLock { $0 = true }
        #expect(await cache.value(now: start + .seconds(1), read: read) == 7, "a second after the failure, the next request reads again")
        #expect(await cache.value(now: start + .seconds(1000), read: read) == 7)
        #expect(reads.withLock { $0 } == 2, "a value read is kept for the whole interval")
    }
}

extension LedgerGauges {
    /// A marker of which read produced these figures (tests only).
    fileprivate func withCount(_ count: Int) -> LedgerGauges {
        var copy = self
        copy.lastSuccess[RunKey(kind: "nightly", pair: .init(bundleId: "com.example.app", environment: .production))] = Date(timeIntervalSince1970: Double(count))
        return copy
    }

    fileprivate var count: Int? { lastSuccess.values.first.map { Int($0.timeIntervalSince1970) } }
}

import Foundation
import Ledger
import LiveReceiver
import SignedData
import Synchronization
import Testing

/// /metrics is reachable by whoever reaches the port: its reads of the ledger are bounded to one
/// per interval, however many scrape.
@Suite("The ledger's figures on /metrics, read at most once per interval")
struct LedgerGaugeCacheTests {
    @Test func scrapesWithinTheIntervalShareOneReadAndALaterOneReadsAgain() async {
        let cache = LedgerGaugeCache(interval: .seconds(10))
        let reads = Mutex(0)
        let start = ContinuousClock.now
        let read: @Sendable () async -> LedgerGauges? = {
            let count = reads.withLock { $0 += 1; return $0 }
            return LedgerGauges().withCount(count)
        }
        let first = await cache.figures(now: start, read: read)
        for second in 1..<100 { _ = await cache.figures(now: start + .milliseconds(second * 90), read: read) }
        #expect(reads.withLock { $0 } == 1, "a hundred scrapes within 10 s: one read")
        #expect(first?.count == 1)
        let later = await cache.figures(now: start + .seconds(10), read: read)
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
        async let running = cache.figures(read: slow)
        for await _ in entered { break }
        let during = await cache.figures { reads.withLock { $0 += 1 }; return LedgerGauges().withCount(9) }
        #expect(during == nil, "nothing read yet: left out, not read a second time")
        release.yield()
        #expect(await running?.count == 1)
        #expect(reads.withLock { $0 } == 1)
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

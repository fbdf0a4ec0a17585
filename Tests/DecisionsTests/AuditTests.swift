import Decisions
import Foundation
import Testing

/// A generator with a seed, for repeatable draws (SplitMix64's published constants).
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("The audit's bound and sample")
struct AuditTests {
    @Test func noDifferenceInThreeThousandBoundsTheShareUnderOneInAThousand() throws {
        let bound = try #require(AuditBound.upperBound95(differing: 0, sampled: 3_000))
        #expect(bound < 0.001)
        #expect(abs(bound - (1 - pow(0.05, 1.0 / 3000))) < 1e-12)
    }

    @Test func theBoundIsTheShareAtWhichSoFewDifferencesHappenOnlyFivePercentOfTheTime() throws {
        // Published Clopper–Pearson one-sided 95% upper limits: 1 of 100 → 0.0466, 5 of 100 → 0.1024, 10 of 1,000 → 0.0168.
        for (x, n, expected) in [(1, 100, 0.0466), (5, 100, 0.1024), (10, 1_000, 0.0168)] {
            let bound = try #require(AuditBound.upperBound95(differing: x, sampled: n))
            #expect(abs(bound - expected) < 0.0005, "\(x) of \(n): \(bound)")
            #expect(abs(AuditBoundProbe.cdf(x, n, bound) - 0.05) < 1e-6)
        }
    }

    @Test func theBoundGrowsWithTheDifferencesAndShrinksWithTheSample() throws {
        let few = try #require(AuditBound.upperBound95(differing: 2, sampled: 500))
        let more = try #require(AuditBound.upperBound95(differing: 6, sampled: 500))
        let larger = try #require(AuditBound.upperBound95(differing: 2, sampled: 5_000))
        #expect(few < more && larger < few && few > 2.0 / 500)
        #expect(AuditBound.upperBound95(differing: 0, sampled: 0) == nil)
        #expect(AuditBound.upperBound95(differing: 7, sampled: 7) == 1)
    }

    /// Rows at keys 1…40 of a range with every third key empty (another App Store's rows).
    static let rows: [Int64: String] = Dictionary(uniqueKeysWithValues: (1...60).filter { $0 % 3 != 0 }.map { (Int64($0), "9\($0)") })

    static func draw(_ wanted: Int, rows: [Int64: String], seed: UInt64) -> (ids: [String], whole: Bool, probes: Int) {
        var random = SeededGenerator(state: seed)
        var sampler = AuditSampler(wanted: wanted, lowest: rows.keys.min()!, highest: rows.keys.max()!)
        var action = sampler.start(using: &random)
        var probes = 0
        while true {
            switch action {
            case .probe(let keys):
                probes += keys.count
                #expect(keys.count <= AuditSampler.maximumBatch)
                action = sampler.probed(keys.compactMap { key in rows[key].map { (key, $0) } }, using: &random)
            case .readAll:
                let ordered = rows.sorted { $0.key < $1.key }.map { (key: $0.key, originalTransactionId: $0.value) }
                for chunk in stride(from: 0, to: ordered.count, by: 7) { sampler.offered(Array(ordered[chunk..<min(chunk + 7, ordered.count)]), using: &random) }
                action = sampler.streamEnded()
            case .done(let ids, let whole):
                return (ids, whole, probes)
            }
        }
    }

    @Test func everyRowIsEquallyLikelyWhetherProbedOrRead() {
        // A large sparse range is probed; a small one is read. Either way each row's share of the
        // draws is the sample's share of the rows.
        let sparse = Dictionary(uniqueKeysWithValues: (0..<200).map { (Int64($0 * 37 + 5), "\($0)") })
        for (rows, wanted) in [(Self.rows, 4), (sparse, 10)] {
            var seen: [String: Int] = [:]
            let trials = 4_000
            for trial in 0..<trials {
                let drawn = Self.draw(wanted, rows: rows, seed: UInt64(trial) &* 7919 &+ 1)
                #expect(drawn.ids.count == wanted && Set(drawn.ids).count == wanted)
                for id in drawn.ids { seen[id, default: 0] += 1 }
            }
            let expected = Double(trials * wanted) / Double(rows.count)
            #expect(seen.count == rows.count, "every row is drawn some time")
            for (id, count) in seen { #expect(abs(Double(count) - expected) < expected * 0.25, "\(id): \(count) of ~\(Int(expected))") }
        }
    }

    @Test func aSampleOfAMillionKeysIsProbedNotRead() {
        // Half the keys of a range of 2,000,000 hold a row: 1,000 drawn in about 2,000 lookups.
        var random = SeededGenerator(state: 3)
        var sampler = AuditSampler(wanted: 1_000, lowest: 1, highest: 2_000_000)
        var action = sampler.start(using: &random)
        var probes = 0
        while case .probe(let keys) = action {
            probes += keys.count
            action = sampler.probed(keys.filter { $0 % 2 == 0 }.map { ($0, "\($0)") }, using: &random)
        }
        guard case .done(let ids, let whole) = action else {
            Issue.record("expected the sample, got \(action)")
            return
        }
        #expect(ids.count == 1_000 && !whole)
        #expect(probes < 4_000, "\(probes) lookups")
    }

    @Test func aSampleLargerThanTheRowsTakesThemAll() {
        let drawn = Self.draw(500, rows: Self.rows, seed: 11)
        #expect(drawn.whole && Set(drawn.ids) == Set(Self.rows.values))
    }
}

/// The binomial distribution the bound inverts, summed directly (a second computation, for the test).
enum AuditBoundProbe {
    static func cdf(_ x: Int, _ n: Int, _ p: Double) -> Double {
        var total = 0.0
        var term = pow(1 - p, Double(n))
        for i in 0...x {
            if i > 0 { term *= Double(n - i + 1) / Double(i) * p / (1 - p) }
            total += term
        }
        return total
    }
}

@Suite("The nightly's audit")
struct NightlyAuditTests {
    @Test func itAsksAtItsShareOfTheSlowerEndpointsRate() {
        #expect(NightlyAudit.standard.requestsPerSecond(statuses: 50, transactionHistory: 50) == 5)
        #expect(NightlyAudit(sample: 10, maxShareOfRateLimit: 0.5).requestsPerSecond(statuses: 100, transactionHistory: 40) == 20)
    }

    @Test func itsDefaultSampleBoundsACleanLedgerUnderOnePercent() throws {
        let bound = try #require(AuditBound.upperBound95(differing: 0, sampled: NightlyAudit.standard.sample))
        #expect(bound < 0.01)
    }
}

import Foundation

/// Which subscriptions an audit asks Apple about: a uniformly random sample of one App Store's,
/// without reading the ledger whole (issue 64, point 2). Each subscription row carries a sample
/// key, distinct and given in order as rows are inserted (migration 0030), so the pair's keys
/// lie in the ledger's [lowest, highest] with gaps (rows of other App Stores, rows deleted). The
/// sampler draws keys uniformly from that range, never the same twice, and keeps those a row of
/// the pair holds: every row is then equally likely, exactly (rejection sampling), each probe one
/// index lookup. When the range is too sparse for probing to pay (a small App Store beside a large
/// one), it asks for every row of the pair instead, streamed in any order, and keeps a uniform
/// sample of them as they pass (reservoir sampling), in memory of the sample's size. A machine: the shell (`LedgerAudit`)
/// executes its actions; the random numbers come from the caller.
package struct AuditSampler: Sendable {
    package enum Action: Sendable, Equatable {
        /// Look these keys up: `probed` with the rows found (key, originalTransactionId).
        case probe([Int64])
        /// Stream every key of the pair: `offered` with each chunk, then `streamEnded`.
        case readAll
        /// The sample: originalTransactionIds in key order; `wholePair` when it is every row.
        case done([String], wholePair: Bool)
    }

    package let wanted: Int
    package let lowest: Int64
    package let highest: Int64
    /// Probes per lookup, at most (one bound array parameter).
    package static let maximumBatch = 5_000
    private var tried = Set<Int64>()
    private var hits = 0
    private var chosen: [Int64: String] = [:]
    /// Reservoir sampling's state: rows seen, and the sample in its slots.
    private var seen = 0
    private var reservoir: [(key: Int64, id: String)] = []

    /// - Parameters: wanted, the sample's size (≥ 1); lowest and highest, the pair's sample keys'
    ///   range (nil when it has no row).
    package init(wanted: Int, lowest: Int64, highest: Int64) {
        self.wanted = max(1, wanted)
        self.lowest = min(lowest, highest)
        self.highest = max(lowest, highest)
    }

    private var rangeSize: Int64 { highest - lowest + 1 }
    private var untried: Int64 { rangeSize - Int64(tried.count) }

    /// The first action.
    package mutating func start(using random: inout some RandomNumberGenerator) -> Action {
        // A range no larger than a few samples: reading it is cheaper than probing it.
        if rangeSize <= Int64(wanted) * 4 { return .readAll }
        return nextProbe(using: &random)
    }

    /// The rows the last probe found.
    package mutating func probed(_ found: [(key: Int64, originalTransactionId: String)], using random: inout some RandomNumberGenerator) -> Action {
        for row in found where chosen.count < wanted {
            guard chosen[row.key] == nil else { continue }
            chosen[row.key] = row.originalTransactionId
            hits += 1
        }
        return nextProbe(using: &random)
    }

    private mutating func nextProbe(using random: inout some RandomNumberGenerator) -> Action {
        let remaining = wanted - chosen.count
        // Probing ends only with the sample whole: every range it could not finish is read instead.
        guard remaining > 0 else { return .done(chosen.sorted { $0.key < $1.key }.map(\.value), wholePair: false) }
        // How many keys of the range hold a row, from what probing found (a first guess of one in two).
        let density = tried.isEmpty ? 0.5 : max(Double(hits) / Double(tried.count), 1 / Double(rangeSize))
        let estimatedRows = density * Double(untried)
        let probesNeeded = Double(remaining) / density
        // Probing costs a lookup a probe; reading every key costs a row a key. Once enough is
        // tried to trust the density, read whichever is fewer.
        if tried.count >= 1_000, probesNeeded > estimatedRows * 2 || estimatedRows <= Double(remaining) * 2 { return .readAll }
        let batch = Int(min(Double(Self.maximumBatch), max(64, probesNeeded * 1.2), Double(untried)))
        var keys: [Int64] = []
        keys.reserveCapacity(batch)
        // Uniform over the untried keys: a key already tried is drawn again. Past half the range
        // that costs more than reading it, which is done instead.
        if Double(tried.count) + Double(batch) > Double(rangeSize) / 2 { return .readAll }
        while keys.count < batch {
            let key = lowest + Int64.random(in: 0..<rangeSize, using: &random)
            if tried.insert(key).inserted { keys.append(key) }
        }
        return .probe(keys)
    }

    /// A chunk of the pair's rows, streamed in any order (`readAll`).
    package mutating func offered(_ rows: [(key: Int64, originalTransactionId: String)], using random: inout some RandomNumberGenerator) {
        for row in rows {
            seen += 1
            if reservoir.count < wanted {
                reservoir.append((row.key, row.originalTransactionId))
            } else {
                let slot = Int.random(in: 0..<seen, using: &random)
                if slot < wanted { reservoir[slot] = (row.key, row.originalTransactionId) }
            }
        }
    }

    /// Every row was offered.
    package func streamEnded() -> Action {
        .done(reservoir.sorted { $0.key < $1.key }.map(\.id), wholePair: seen <= wanted)
    }
}

import Atomics
import Foundation

/// Remembers, per distinct JWS header (and so per distinct x5c chain), the parsed chain and the
/// interval in which it was found valid. Validating a chain depends only on the validation
/// time, so after one full RFC 5280 validation every further payload signed with the same
/// chain costs a lookup and a time comparison.
///
/// Readers never take a lock: the entries live in an immutable snapshot that is swapped
/// atomically when an entry is added (rare: Apple signs with a handful of chains).
final class ChainCache: Sendable {
    final class Entry: Sendable {
        let header: String
        let chain: Result<AppleCertificateChain, Rejection>
        /// Where an offline validation found the whole chain (leaf, intermediate, configured
        /// root) valid; nil until one succeeded.
        let trustedInterval: ClosedRange<Date>?

        init(header: String, chain: Result<AppleCertificateChain, Rejection>, trustedInterval: ClosedRange<Date>?) {
            self.header = header
            self.chain = chain
            self.trustedInterval = trustedInterval
        }
    }

    final class Snapshot: AtomicReference, Sendable {
        let entries: [Int: [Entry]]
        let count: Int
        init(entries: [Int: [Entry]], count: Int) {
            self.entries = entries
            self.count = count
        }
    }

    /// More distinct chains than this in one process means something other than Apple is
    /// signing; the cache then starts over rather than grow.
    static let capacity = 64

    private let snapshot = ManagedAtomic(Snapshot(entries: [:], count: 0))

    /// The entry for a header segment, parsing and remembering it on first sight.
    func entry(for header: Substring) -> Entry {
        let key = Self.key(header)
        if let found = snapshot.load(ordering: .acquiring).entries[key]?.first(where: { Self.same($0.header, header) }) {
            return found
        }
        let entry = Entry(
            header: String(header),
            chain: AppleCertificateChain.parse(headerSegment: header),
            trustedInterval: nil
        )
        store(entry, key: key)
        return entry
    }

    /// Records that an entry's chain validated over `interval`.
    func recordTrust(_ entry: Entry, interval: ClosedRange<Date>) {
        let updated = Entry(header: entry.header, chain: entry.chain, trustedInterval: interval)
        store(updated, key: Self.key(Substring(entry.header)))
    }

    private func store(_ entry: Entry, key: Int) {
        while true {
            let current = snapshot.load(ordering: .acquiring)
            var entries = current.count >= Self.capacity ? [:] : current.entries
            var bucket = entries[key, default: []]
            let replacing = bucket.contains { $0.header == entry.header }
            bucket.removeAll { $0.header == entry.header }
            bucket.append(entry)
            entries[key] = bucket
            let count = current.count >= Self.capacity ? 1 : current.count + (replacing ? 0 : 1)
            let next = Snapshot(entries: entries, count: count)
            if snapshot.compareExchange(expected: current, desired: next, ordering: .acquiringAndReleasing).exchanged {
                return
            }
        }
    }

    /// A cheap key: the segment's length and its first 256 bytes, which encode the start of the
    /// leaf certificate. Entries are still compared in full, so a collision is only a miss.
    private static func key(_ header: Substring) -> Int {
        var hasher = Hasher()
        hasher.combine(header.utf8.count)
        if header.utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: $0.prefix(256)))) }) == nil {
            for byte in header.utf8.prefix(256) { hasher.combine(byte) }
        }
        return hasher.finalize()
    }

    private static func same(_ stored: String, _ header: Substring) -> Bool {
        var stored = stored
        let match = stored.withUTF8 { storedBytes in
            header.utf8.withContiguousStorageIfAvailable { headerBytes in
                storedBytes.count == headerBytes.count
                    && (storedBytes.isEmpty || memcmp(storedBytes.baseAddress!, headerBytes.baseAddress!, storedBytes.count) == 0)
            }
        }
        return match ?? stored.utf8.elementsEqual(header.utf8)
    }
}

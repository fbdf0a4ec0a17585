import Crypto
import Foundation

/// One of COUNT workers that share a run (`--shard INDEX/COUNT`, INDEX from 0). The split is a
/// pure function of the window and the customer, so every worker computes the same one:
/// - pass 1: the window in COUNT consecutive sub-windows of equal length, this shard's is INDEX;
/// - pass 2: the customers whose `originalTransactionId` hashes (SHA-256, first 8 bytes, big
///   endian) to INDEX modulo COUNT;
/// - Apple's per-endpoint rate budget: divided by COUNT, so that all shards together stay in it.
package struct Shard: Hashable, Sendable, CustomStringConvertible {
    package let index: Int
    package let count: Int

    /// The whole run, unsharded.
    package static let whole = Shard(uncheckedIndex: 0, count: 1)

    private init(uncheckedIndex index: Int, count: Int) {
        self.index = index
        self.count = count
    }

    package init(index: Int, count: Int) throws {
        guard count >= 1, count <= 255 else { throw ShardError("the shard count must be 1 to 255, not \(count)") }
        guard index >= 0, index < count else { throw ShardError("the shard index must be 0 to \(count - 1) for \(count) shards, not \(index)") }
        self.init(uncheckedIndex: index, count: count)
    }

    /// Parses "INDEX/COUNT", e.g. "2/4".
    package init(parsing text: String) throws {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else {
            throw ShardError("'\(text.prefix(20))' is not a shard: use INDEX/COUNT with INDEX from 0, e.g. 0/4 (Kubernetes: $(JOB_COMPLETION_INDEX)/4)")
        }
        try self.init(index: index, count: count)
    }

    package var description: String { "\(index)/\(count)" }
    package var isWhole: Bool { count == 1 }

    /// This shard's part of the window, in whole milliseconds; the parts cover it without overlap.
    package func subWindow(of window: OutageWindow) -> OutageWindow {
        guard count > 1 else { return window }
        let start = window.startMilliseconds
        let length = window.endMilliseconds - start
        func boundary(_ i: Int) -> Date {
            let offset = length / Int64(count) * Int64(i) + length % Int64(count) * Int64(i) / Int64(count)
            return Date(timeIntervalSince1970: Double(start + offset) / 1000)
        }
        var part = window
        part.start = boundary(index)
        part.end = index == count - 1 ? window.end : boundary(index + 1)
        return part
    }

    /// Whether this shard repairs the customer in pass 2.
    package func owns(customer originalTransactionId: String) -> Bool {
        guard count > 1 else { return true }
        return Self.bucket(originalTransactionId, count: count) == index
    }

    static func bucket(_ originalTransactionId: String, count: Int) -> Int {
        let digest = SHA256.hash(data: Data(originalTransactionId.utf8))
        let value = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Int(value % UInt64(count))
    }

    /// Each shard's share of a rate limit.
    package func share(of requestsPerSecond: Double) -> Double { requestsPerSecond / Double(count) }
}

package struct ShardError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}

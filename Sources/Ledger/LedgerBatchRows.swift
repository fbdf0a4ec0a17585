import Foundation

/// A batch's rows as one JSON array per table (written by `RowJSON` from the tables' columns), for `jsonb_to_recordset`:
/// one statement writes a page's notifications, transactions and subscriptions instead of a
/// round trip per row. Every value still travels as a bound parameter (the JSON text is one).
/// Times are UNIX milliseconds, the precision of everything Apple signs, turned into
/// timestamptz exactly by `timestamptz 'epoch' + ms * interval '1 millisecond'`. The signed
/// payloads, a few kilobytes each, are not in the JSON: they travel beside it as one text
/// array, joined to the rows by key (`unnest(keys, payloads) … USING (key)`), so that neither
/// side escapes and parses them as JSON.
enum LedgerBatchRows {
    /// The notifications' signed payloads, in the records' order.
    static func notifications(_ records: [NotificationRecord]) -> (rows: [NotificationRecord], payloads: [String]) {
        (records, records.map(\.signedPayload))
    }

    /// One row per transaction: the newest signed version in the batch (the first of equals), as
    /// applying them one by one would leave it.
    static func transactions(_ records: [TransactionRecord]) -> (rows: [TransactionRecord], payloads: [String]) {
        let newest = newestPerKey(records, key: \.transactionId, date: \.signedDate)
        return (newest, newest.map(\.signedTransaction))
    }

    static func subscriptions(_ records: [SubscriptionRecord]) -> [SubscriptionRecord] {
        newestPerKey(records, key: \.originalTransactionId, date: \.lastSignedDate)
    }

    /// A subscription a run changed: before (nil: none) and after.
    struct SubscriptionChange {
        var before: SubscriptionRecord?
        var after: SubscriptionRecord
    }

    static func newestPerKey<Record>(_ records: [Record], key: KeyPath<Record, String>, date: KeyPath<Record, Date>) -> [Record] {
        var chosen: [String: Int] = [:]
        for (index, record) in records.enumerated() {
            if let current = chosen[record[keyPath: key]], records[current][keyPath: date].unixMilliseconds >= record[keyPath: date].unixMilliseconds {
                continue
            }
            chosen[record[keyPath: key]] = index
        }
        // In key order: two batches writing the same rows lock them in the same order, so they
        // wait for each other rather than deadlock.
        return chosen.sorted { $0.key < $1.key }.map { records[$0.value] }
    }
}

import Foundation
import LedgerModel
import NIOCore

/// A batch's rows as one JSON array per table (written by `RowJSON` from the tables' columns), for `jsonb_to_recordset`:
/// one statement writes a page's notifications, transactions and subscriptions instead of a
/// round trip per row. Every value still travels as a bound parameter (the JSON text is one).
/// Times are UNIX milliseconds, the precision of everything Apple signs, turned into
/// timestamptz exactly by `timestamptz 'epoch' + ms * interval '1 millisecond'`. The signed
/// payloads are not in the JSON: each row carries its JWS's key, and the JWS travel beside the
/// rows as signed objects (`Objects`: header, payload and signature bytes in arrays of bytea),
/// so that neither side escapes and parses them as JSON.
enum LedgerBatchRows {
    /// One row per transaction: the newest signed version in the batch (the first of equals), as
    /// applying them one by one would leave it.
    static func transactions(_ records: [TransactionRecord]) -> [TransactionRecord] {
        newestPerKey(records, key: \.transactionId, date: \.signedDate)
    }

    /// The signed objects (migration 0021) that store a batch's notifications' and transactions' JWS,
    /// each with the row it belongs to (`n:` and the notification's UUID, `t:` and the
    /// transaction's ID): the statement stores an object only if that row is written, so a
    /// notification already recorded or a transaction re-signed without change stores nothing.
    /// Headers once each. Keys (SHA-256) and owners travel as JSON (`headersJSON`, `objectsJSON`,
    /// keys in hex); payloads and signatures, the bulk, as arrays of bytea in the objects' order
    /// (`ordinal` in the JSON).
    struct Objects {
        struct Object {
            var key: [UInt8]
            var header: [UInt8]?
            var wholeText: String?
            var nested: [UInt8]?
            var owner: String
        }

        private(set) var headers: [(key: [UInt8], text: String)] = []
        private(set) var objects: [Object] = []
        private(set) var payloads: [ByteBuffer] = []
        private(set) var signatures: [ByteBuffer] = []
        /// Each notification's and each transaction's own object key, in the records' order.
        private(set) var notificationKeys: [[UInt8]] = []
        private(set) var transactionKeys: [[UInt8]] = []
        private var seenHeaders: Set<[UInt8]> = []

        init(notifications: [NotificationRecord], transactions: [TransactionRecord]) {
            for record in notifications {
                notificationKeys.append(add(SignedObject.objects(storing: record.signedPayload), owner: "n:" + record.notificationUUID.uuidString.lowercased()))
            }
            for record in transactions {
                transactionKeys.append(add(SignedObject.objects(storing: record.signedTransaction), owner: "t:" + record.transactionId))
            }
        }

        /// `[{"key":hex,"header":text},...]`.
        var headersJSON: String {
            RowJSON.array(headers, capacity: 4096, fields: { ["key": .hex($0.key), "header": .text($0.text)] })
        }

        /// `[{"ordinal":i,"key":hex,"owner":…,"header":hex,"nested":hex,"jws":whole JWS},...]` (`ordinal` from 1), absent values left out.
        var objectsJSON: String {
            RowJSON.array(Array(objects.enumerated()), capacity: 220, fields: { index, object in
                [
                    "ordinal": .integer(Int64(index + 1)), "key": .hex(object.key), "owner": .text(object.owner),
                    "header": .hex(object.header), "nested": .hex(object.nested), "jws": .text(object.wholeText),
                ]
            })
        }

        /// Adds a JWS's objects; returns its own key (the first object's).
        private mutating func add(_ signed: [SignedObject], owner: String) -> [UInt8] {
            for object in signed {
                switch object.form {
                case .whole(let text):
                    objects.append(Object(key: object.key, wholeText: text, owner: owner))
                    payloads.append(ByteBuffer())
                    signatures.append(ByteBuffer())
                case .split(let header, let headerKey, let payload, let signature, let nestedKeys):
                    if seenHeaders.insert(headerKey).inserted {
                        headers.append((key: headerKey, text: header))
                    }
                    let nested = nestedKeys.joined()
                    objects.append(Object(key: object.key, header: headerKey, nested: nested.isEmpty ? nil : Array(nested), owner: owner))
                    payloads.append(ByteBuffer(bytes: payload))
                    signatures.append(ByteBuffer(bytes: signature))
                }
            }
            return signed[0].key
        }
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

import Foundation

/// The batch rows' JSON (for `jsonb_to_recordset`) and the change feed's context
/// (`changeContext`), written by hand: rows from each table's columns
/// (`LedgerRow.columns`): with `JSONEncoder` it was about 5% of the reconciler's CPU in pass 1 of
/// the end-to-end benchmark (perf), for a few dozen small rows a page. Absent values are left
/// out, and `jsonb_to_recordset` reads a missing key as NULL. Times are UNIX milliseconds, under
/// the column's `jsonKey`. `RowJSONTests` parse it back with `JSONSerialization`.
struct RowJSON {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    init(capacity: Int = 1024) {
        bytes.reserveCapacity(capacity)
    }

    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// `[row,row,...]`.
    static func array<Record: LedgerRow>(_ records: [Record]) -> String {
        var json = RowJSON(capacity: records.count * 256 + 2)
        json.bytes.append(UInt8(ascii: "["))
        for (index, record) in records.enumerated() {
            if index > 0 { json.bytes.append(UInt8(ascii: ",")) }
            json.object(record)
        }
        json.bytes.append(UInt8(ascii: "]"))
        return json.text
    }

    /// `[{"original_transaction_id":…,"before":{…},"after":{…}},...]`, `before` left out when there was no row.
    static func array(_ changes: [LedgerBatchRows.SubscriptionChange]) -> String {
        var json = RowJSON(capacity: changes.count * 512 + 2)
        json.bytes.append(UInt8(ascii: "["))
        for (index, change) in changes.enumerated() {
            if index > 0 { json.bytes.append(UInt8(ascii: ",")) }
            json.bytes.append(UInt8(ascii: "{"))
            json.needsComma = false
            json.key("original_transaction_id")
            json.string(change.after.originalTransactionId)
            if let before = change.before {
                json.key("before")
                json.object(before)
            }
            json.key("after")
            json.object(change.after)
            json.bytes.append(UInt8(ascii: "}"))
        }
        json.bytes.append(UInt8(ascii: "]"))
        return json.text
    }

    /// A value of a statement's own fields (beside a record's columns): absent ones are left out.
    enum Field {
        case text(String?)
        case integer(Int64?)
        case boolean(Bool?)
        /// Bytes as lowercase hex, for `decode(…, 'hex')` (keys of 32 bytes: cheaper than a bytea array each).
        case hex([UInt8]?)
        case uuids([UUID])
    }

    /// `{"name":value,...}` of a statement's own fields, in the given order.
    static func object(_ fields: KeyValuePairs<String, Field>) -> String {
        var json = RowJSON(capacity: 256)
        json.fields(fields)
        return json.text
    }

    /// `[{...},...]`, one object of fields per element.
    static func array<Element>(_ elements: [Element], capacity: Int = 128, fields: (Element) -> KeyValuePairs<String, Field>) -> String {
        var json = RowJSON(capacity: elements.count * capacity + 2)
        json.bytes.append(UInt8(ascii: "["))
        for (index, element) in elements.enumerated() {
            if index > 0 { json.bytes.append(UInt8(ascii: ",")) }
            json.fields(fields(element))
        }
        json.bytes.append(UInt8(ascii: "]"))
        return json.text
    }

    /// `[row,...]` where each row also carries the statement's own fields (`extra`, by the record's index).
    static func array<Record: LedgerRow>(_ records: [Record], extra: (Int) -> KeyValuePairs<String, Field>) -> String {
        var json = RowJSON(capacity: records.count * 320 + 2)
        json.bytes.append(UInt8(ascii: "["))
        for (index, record) in records.enumerated() {
            if index > 0 { json.bytes.append(UInt8(ascii: ",")) }
            json.object(record, extra: extra(index))
        }
        json.bytes.append(UInt8(ascii: "]"))
        return json.text
    }

    private mutating func fields(_ fields: KeyValuePairs<String, Field>) {
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        append(fields)
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    private mutating func append(_ fields: KeyValuePairs<String, Field>) {
        let digits = Array("0123456789abcdef".utf8)
        for (name, field) in fields {
            switch field {
            case .text(let text?):
                key(name)
                string(text)
            case .integer(let number?):
                key(name)
                bytes.append(contentsOf: String(number).utf8)
            case .boolean(let flag?):
                key(name)
                bytes.append(contentsOf: (flag ? "true" : "false").utf8)
            case .hex(let data?):
                key(name)
                bytes.append(UInt8(ascii: "\""))
                for byte in data {
                    bytes.append(digits[Int(byte >> 4)])
                    bytes.append(digits[Int(byte & 0xF)])
                }
                bytes.append(UInt8(ascii: "\""))
            case .uuids(let uuids):
                key(name)
                bytes.append(UInt8(ascii: "["))
                for (index, uuid) in uuids.enumerated() {
                    if index > 0 { bytes.append(UInt8(ascii: ",")) }
                    string(uuid.uuidString)
                }
                bytes.append(UInt8(ascii: "]"))
            case .text(nil), .integer(nil), .boolean(nil), .hex(nil):
                continue
            }
        }
    }

    mutating func object<Record: LedgerRow>(_ record: Record, extra: KeyValuePairs<String, Field> = [:]) {
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        append(extra)
        for column in Record.columns {
            guard let value = column.get(record) else { continue }
            key(column.jsonKey)
            switch value {
            case .text(let text): string(text)
            case .integer(let number): bytes.append(contentsOf: String(number).utf8)
            case .boolean(let flag): bytes.append(contentsOf: (flag ? "true" : "false").utf8)
            case .time(let date): bytes.append(contentsOf: String(date.unixMilliseconds).utf8)
            case .uuid(let uuid): string(uuid.uuidString)
            case .texts(let texts):
                bytes.append(UInt8(ascii: "["))
                for (index, text) in texts.enumerated() {
                    if index > 0 { bytes.append(UInt8(ascii: ",")) }
                    string(text)
                }
                bytes.append(UInt8(ascii: "]"))
            }
        }
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// `{"key":"value",...}` of strings, keys in sorted order.
    mutating func object(_ pairs: [String: String]) {
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        for (name, value) in pairs.sorted(by: { $0.key < $1.key }) {
            if needsComma { bytes.append(UInt8(ascii: ",")) }
            string(name)  // keys are data here (originalTransactionIds): escaped like values
            bytes.append(UInt8(ascii: ":"))
            string(value)
            needsComma = true
        }
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// The transaction's `app_store.change_context` (migration 0007):
    /// `{"cause":…,"run":…|null,"notifications":{"subscription":{…},"transaction":{…}}}`.
    static func changeContext(cause: String, runId: UUID?, subscriptions: [String: UUID], transactions: [String: UUID]) -> String {
        var json = RowJSON(capacity: 96 + 90 * (subscriptions.count + transactions.count))
        json.bytes.append(UInt8(ascii: "{"))
        json.key("cause")
        json.string(cause)
        json.key("run")
        if let runId { json.string(runId.uuidString.lowercased()) } else { json.bytes.append(contentsOf: "null".utf8) }
        json.key("notifications")
        json.bytes.append(UInt8(ascii: "{"))
        json.needsComma = false
        json.key("subscription")
        json.object(subscriptions.mapValues { $0.uuidString.lowercased() })
        json.key("transaction")
        json.object(transactions.mapValues { $0.uuidString.lowercased() })
        json.bytes.append(contentsOf: "}}".utf8)
        return json.text
    }

    private mutating func key(_ name: String) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: name.utf8)
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        needsComma = true
    }

    /// A quoted string: `"` and `\` escaped, control characters as \u00XX, the rest as is (UTF-8).
    private mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// The batch rows' JSON (for `jsonb_to_recordset`), written by hand: with `JSONEncoder` it was
/// about 5% of the reconciler's CPU in pass 1 of the end-to-end benchmark (perf), for a few
/// dozen small rows a page. Absent values are left out, as `JSONEncoder` leaves them out, and
/// `jsonb_to_recordset` reads a missing key as NULL. `RowJSONTests` compare it with
/// `JSONEncoder`'s output for the same rows.
struct RowJSON {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    init(capacity: Int = 1024) {
        bytes.reserveCapacity(capacity)
    }

    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// `[row,row,...]`.
    static func array<Row: JSONRow>(_ rows: [Row]) -> String {
        var json = RowJSON(capacity: rows.count * 256 + 2)
        json.bytes.append(UInt8(ascii: "["))
        for (index, row) in rows.enumerated() {
            if index > 0 { json.bytes.append(UInt8(ascii: ",")) }
            json.object(row)
        }
        json.bytes.append(UInt8(ascii: "]"))
        return json.text
    }

    mutating func object<Row: JSONRow>(_ row: Row) {
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        row.write(to: &self)
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    private mutating func key(_ name: StaticString) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        needsComma = true
    }

    mutating func field(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        string(value)
    }

    mutating func field(_ name: StaticString, _ value: Int64?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func field(_ name: StaticString, _ value: Int?) {
        field(name, value.map(Int64.init))
    }

    mutating func field(_ name: StaticString, _ value: Bool?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    mutating func field<Row: JSONRow>(_ name: StaticString, _ value: Row?) {
        guard let value else { return }
        key(name)
        object(value)
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

/// A row that writes itself as a JSON object.
protocol JSONRow {
    func write(to json: inout RowJSON)
}

extension LedgerBatchRows.Notification: JSONRow {
    func write(to json: inout RowJSON) {
        json.field("notification_uuid", notification_uuid)
        json.field("notification_type", notification_type)
        json.field("subtype", subtype)
        json.field("signed_ms", signed_ms)
        json.field("environment", environment)
        json.field("original_transaction_id", original_transaction_id)
        json.field("transaction_id", transaction_id)
        json.field("source", source)
    }
}

extension LedgerBatchRows.Transaction: JSONRow {
    func write(to json: inout RowJSON) {
        json.field("transaction_id", transaction_id)
        json.field("original_transaction_id", original_transaction_id)
        json.field("product_id", product_id)
        json.field("product_type", product_type)
        json.field("purchase_ms", purchase_ms)
        json.field("expires_ms", expires_ms)
        json.field("revocation_ms", revocation_ms)
        json.field("revocation_reason", revocation_reason)
        json.field("is_upgraded", is_upgraded)
        json.field("signed_ms", signed_ms)
        json.field("environment", environment)
    }
}

extension LedgerBatchRows.Subscription: JSONRow {
    func write(to json: inout RowJSON) {
        json.field("original_transaction_id", original_transaction_id)
        json.field("product_id", product_id)
        json.field("status", status)
        json.field("expires_ms", expires_ms)
        json.field("auto_renew_status", auto_renew_status)
        json.field("auto_renew_product_id", auto_renew_product_id)
        json.field("is_in_billing_retry", is_in_billing_retry)
        json.field("grace_period_expires_ms", grace_period_expires_ms)
        json.field("last_signed_ms", last_signed_ms)
        json.field("environment", environment)
    }
}

extension LedgerBatchRows.SubscriptionChange: JSONRow {
    func write(to json: inout RowJSON) {
        json.field("original_transaction_id", original_transaction_id)
        json.field("before", before)
        json.field("after", after)
    }
}

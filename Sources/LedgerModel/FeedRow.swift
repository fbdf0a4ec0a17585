package import Foundation

/// A row as the change feed holds it (`app_store.changes`' `before` and `after`, migration 0007):
/// a JSON object of the table's columns under their `jsonKey`, times as UNIX milliseconds,
/// absent values left out, the signed JWS and the bookkeeping times not carried.
extension LedgerRow {
    /// The record a feed row describes; a value of the wrong kind is `LedgerColumnMismatch`.
    package init(feedRow object: [String: Any]) throws {
        var record = Self.blank
        // A column the feed does not carry keeps the blank record's value.
        for column in Self.columns where object[column.jsonKey] != nil {
            try column.set(&record, try Self.value(object[column.jsonKey], of: column))
        }
        self = record
    }

    /// The record of a feed row's JSON text.
    package init(feedRow text: String) throws {
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw LedgerColumnMismatch(column: "(row)")
        }
        try self.init(feedRow: object)
    }

    static func value(_ raw: Any?, of column: LedgerColumn<Self>) throws -> LedgerValue? {
        guard let raw, !(raw is NSNull) else { return nil }
        func mismatch() -> LedgerColumnMismatch { LedgerColumnMismatch(column: column.name) }
        switch column.kind {
        case .text:
            guard let text = raw as? String else { throw mismatch() }
            return .text(text)
        case .smallint, .integer, .bigint:
            guard let number = integer(raw) else { throw mismatch() }
            return .integer(number)
        case .boolean:
            guard let flag = raw as? Bool else { throw mismatch() }
            return .boolean(flag)
        case .uuid:
            guard let text = raw as? String, let uuid = UUID(uuidString: text) else { throw mismatch() }
            return .uuid(uuid)
        case .time:
            guard let number = integer(raw) else { throw mismatch() }
            return .time(Date(timeIntervalSince1970: Double(number) / 1000))
        case .textArray:
            guard let texts = raw as? [String] else { throw mismatch() }
            return .texts(texts)
        }
    }

    /// A JSON number with no fraction, however Foundation hands it over.
    static func integer(_ raw: Any) -> Int64? {
        if let value = raw as? Int64 { return value }
        if let value = raw as? Int { return Int64(value) }
        if let value = raw as? Double, value.rounded() == value, abs(value) < 9.2e18 { return Int64(value) }
        if let value = raw as? NSNumber { return value.int64Value }
        return nil
    }
}

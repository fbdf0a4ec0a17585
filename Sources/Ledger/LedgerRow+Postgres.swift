import Foundation
@_exported import LedgerModel
package import PostgresNIO

// The ledger's records and their columns are values (LedgerModel, re-exported here); reading
// them from PostgreSQL's rows is this target's.

extension LedgerRow {
    /// The record in `cells`, which hold the columns in order from `offset` on.
    package static func read(_ cells: [PostgresCell], from offset: Int = 0) throws -> Self {
        var record = blank
        for (index, column) in columns.enumerated() {
            try column.read(cells[offset + index], into: &record)
        }
        return record
    }

    /// The record in a row selected with `selectList()`.
    package static func read(_ row: PostgresRow) throws -> Self {
        try read(Array(row))
    }
}

extension LedgerColumn {
    /// Reads the column's cell into the record.
    package func read(_ cell: PostgresCell, into record: inout Record) throws {
        let value: LedgerValue? =
            switch kind {
            case .text: try cell.decode(String?.self).map(LedgerValue.text)
            case .smallint, .integer, .bigint: try cell.decode(Int64?.self).map(LedgerValue.integer)
            case .boolean: try cell.decode(Bool?.self).map(LedgerValue.boolean)
            case .uuid: try cell.decode(UUID?.self).map(LedgerValue.uuid)
            case .time: try cell.decode(Date?.self).map(LedgerValue.time)
            case .textArray: try cell.decode([String]?.self).map(LedgerValue.texts)
            }
        try set(&record, value)
    }
}

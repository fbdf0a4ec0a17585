import Foundation

/// A record that is a row of a ledger table, with the table's columns listed once.
package protocol LedgerRow: Sendable {
    /// The table's columns, in the order SQL lists them (the signed payload aside: it travels
    /// beside the JSON, see `LedgerStore.RowsWrite`).
    static var columns: [LedgerColumn<Self>] { get }
    /// A record every column is then read into.
    static var blank: Self { get }
}

extension LedgerRow {
    /// `name, name, …`, for INSERT and SELECT lists; with `prefix`, each as `prefix.name`.
    package static func selectList(prefix: String? = nil) -> String {
        columns.map { column in prefix.map { "\($0).\(column.name)" } ?? column.name }.joined(separator: ", ")
    }

    /// `key type, …`: the JSON record's shape, for `jsonb_to_recordset(…) AS r(…)`.
    package static var recordsetTypes: String {
        columns.map { "\($0.jsonKey) \($0.jsonSQLType)" }.joined(separator: ", ")
    }

    /// The columns' values from the JSON record `source`, in column order.
    package static func values(from source: String) -> String {
        columns.map { $0.value(from: source) }.joined(separator: ", ")
    }

    /// The `SET` list of an upsert into `table`: every column but the key's.
    package static func updateList(table: String) -> String {
        columns.compactMap { column in
            switch column.update {
            case .key: nil
            case .replace: "\(column.name) = EXCLUDED.\(column.name)"
            case .keepWhenAbsent: "\(column.name) = coalesce(EXCLUDED.\(column.name), \(table).\(column.name))"
            }
        }.joined(separator: ",\n    ")
    }

    /// Whether an upsert into `table` changes the row's content: SQL that is true when any compared
    /// column (every column Apple's payloads set, not the signing time) would take another value.
    /// The new values are the ones `updateList` writes, so a column kept when absent compares the
    /// value it keeps.
    package static func contentChanges(table: String) -> String {
        let compared = columns.filter { $0.compared && $0.update != .key }
        let old = compared.map { "\(table).\($0.name)" }
        let new = compared.map { column in
            column.update == .keepWhenAbsent
                ? "coalesce(EXCLUDED.\(column.name), \(table).\(column.name))" : "EXCLUDED.\(column.name)"
        }
        return "(\(old.joined(separator: ", "))) IS DISTINCT FROM (\(new.joined(separator: ", ")))"
    }

    /// `NULL, …`, one per column after the first: a UNION branch that puts another key in the
    /// first column and has no such row.
    package static var nullsAfterKey: String {
        Array(repeating: "NULL", count: columns.count - 1).joined(separator: ", ")
    }

    /// Field by field, where `after` differs from `before` (nil: no row) in the compared
    /// columns: (field name, before, after) as people read them.
    package static func differences(_ before: Self?, _ after: Self) -> [(field: String, before: String?, after: String?)] {
        columns.filter(\.compared).compactMap { column in
            let old = before.flatMap(column.get)
            let new = column.get(after)
            return old == new ? nil : (column.fieldName, old?.description, new?.description)
        }
    }

    /// Whether the compared columns hold the same values.
    package static func sameContent(_ lhs: Self, _ rhs: Self) -> Bool {
        columns.allSatisfy { !$0.compared || $0.get(lhs) == $0.get(rhs) }
    }
}

package import Foundation

/// A value of a ledger column, as the ledger's SQL, JSON and comparisons see it.
package enum LedgerValue: Hashable, Sendable {
    case text(String)
    case integer(Int64)
    case boolean(Bool)
    /// A time, compared and carried at Apple's precision: UNIX milliseconds.
    case time(Date)
    case uuid(UUID)
    /// A list of strings (`text[]`, Apple's arrays of IDs), in Apple's order.
    case texts([String])

    /// For people (the repair diff): times as ISO 8601, UUIDs in lower case.
    package var description: String {
        switch self {
        case .text(let text): text
        case .integer(let number): String(number)
        case .boolean(let flag): flag ? "true" : "false"
        case .time(let date): date.formatted(.iso8601)
        case .uuid(let uuid): uuid.uuidString.lowercased()
        case .texts(let texts): "[" + texts.joined(separator: ", ") + "]"
        }
    }

    package static func == (lhs: LedgerValue, rhs: LedgerValue) -> Bool {
        switch (lhs, rhs) {
        case (.text(let a), .text(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.boolean(let a), .boolean(let b)): a == b
        case (.time(let a), .time(let b)): a.unixMilliseconds == b.unixMilliseconds
        case (.uuid(let a), .uuid(let b)): a == b
        case (.texts(let a), .texts(let b)): a == b
        default: false
        }
    }

    package func hash(into hasher: inout Hasher) {
        switch self {
        case .text(let text): hasher.combine(text)
        case .integer(let number): hasher.combine(number)
        case .boolean(let flag): hasher.combine(flag)
        case .time(let date): hasher.combine(date.unixMilliseconds)
        case .uuid(let uuid): hasher.combine(uuid)
        case .texts(let texts): hasher.combine(texts)
        }
    }
}

/// One column of a ledger table: its name and type, what an upsert does to it, and how a
/// record's field reaches it and comes back. Each table lists its columns once, beside its
/// record (`SubscriptionRecord.columns`); the SQL that writes and reads the table, the batch JSON
/// and the repair's field-by-field comparison are all made from that list, so a new column is
/// its field, its line in the list and the migration that adds it.
package struct LedgerColumn<Record>: Sendable {
    package enum Kind: Sendable {
        case text, smallint, integer, bigint, boolean, uuid
        /// `text[]`, carried in the batch JSON as an array of strings.
        case textArray
        /// `timestamptz`, carried in the batch JSON as UNIX milliseconds (the precision of
        /// everything Apple signs) under the column's name with `_date` replaced by `_ms`.
        case time
    }

    /// What writing a row that exists does to the column.
    package enum Update: Sendable {
        /// The new value replaces the old.
        case replace
        /// The new value replaces the old unless it is absent (NULL).
        case keepWhenAbsent
        /// Part of the row's key: never updated.
        case key
    }

    package let name: String
    package let kind: Kind
    package let update: Update
    /// Whether a repair compares the column with Apple's answer: every column that comes from
    /// Apple's payloads, not the signing time (a newer signature is not a change) nor bookkeeping.
    package let compared: Bool
    package let get: @Sendable (Record) -> LedgerValue?
    package let set: @Sendable (inout Record, LedgerValue?) throws -> Void

    /// The key of the column's value in the batch JSON and in before/after records.
    package let jsonKey: String

    /// The name a report gives the field: the column's name in lower camel case (`expires_date`: `expiresDate`).
    package var fieldName: String {
        let words = name.split(separator: "_")
        return words.enumerated().map { $0.offset == 0 ? String($0.element) : $0.element.prefix(1).uppercased() + $0.element.dropFirst() }.joined()
    }

    /// The SQL type of the column.
    package var sqlType: String {
        switch kind {
        case .text: "text"
        case .smallint: "smallint"
        case .integer: "integer"
        case .bigint: "bigint"
        case .boolean: "boolean"
        case .uuid: "uuid"
        case .time: "timestamptz"
        case .textArray: "text[]"
        }
    }

    /// The type of the column's value in the batch JSON, for `jsonb_to_recordset`.
    package var jsonSQLType: String { kind == .time ? "bigint" : sqlType }

    /// The SQL that turns the JSON record `source`'s value into the column's value.
    package func value(from source: String) -> String {
        kind == .time ? "timestamptz 'epoch' + \(source).\(jsonKey) * interval '1 millisecond'" : "\(source).\(jsonKey)"
    }

    package init(
        _ name: String, _ kind: Kind, update: Update, compared: Bool, get: @escaping @Sendable (Record) -> LedgerValue?,
        set: @escaping @Sendable (inout Record, LedgerValue?) throws -> Void
    ) {
        self.name = name
        self.kind = kind
        self.jsonKey = kind == .time && name.hasSuffix("_date") ? String(name.dropLast(5)) + "_ms" : name
        self.update = update
        self.compared = compared
        self.get = get
        self.set = set
    }
}

/// A column read as NULL, or as a value of another kind, where the record's field cannot hold it.
package struct LedgerColumnMismatch: Error, CustomStringConvertible {
    package var column: String
    package var description: String { "the ledger column \(column) holds no value of the kind its record expects" }
    package init(column: String) { self.column = column }
}

// MARK: Columns from a record's fields

extension LedgerValue {
    package var text: String? { if case .text(let value) = self { value } else { nil } }
    package var integer: Int64? { if case .integer(let value) = self { value } else { nil } }
    package var boolean: Bool? { if case .boolean(let value) = self { value } else { nil } }
    package var time: Date? { if case .time(let value) = self { value } else { nil } }
    package var uuid: UUID? { if case .uuid(let value) = self { value } else { nil } }
    package var texts: [String]? { if case .texts(let value) = self { value } else { nil } }
}

extension LedgerColumn {
    /// A record's field, as the column's get and set reach it.
    typealias Field<Value> = any WritableKeyPath<Record, Value> & Sendable

    /// A column whose field may be absent (NULL).
    private static func optional<Value>(
        _ name: String, _ kind: Kind, _ field: Field<Value?>, update: Update, compared: Bool,
        wrap: @escaping @Sendable (Value) -> LedgerValue, unwrap: @escaping @Sendable (LedgerValue) -> Value?
    ) -> Self {
        Self(name, kind, update: update, compared: compared, get: { $0[keyPath: field].map(wrap) }) { record, value in
            guard let value else { record[keyPath: field] = nil; return }
            guard let unwrapped = unwrap(value) else { throw LedgerColumnMismatch(column: name) }
            record[keyPath: field] = unwrapped
        }
    }

    /// A column whose field always has a value (NOT NULL).
    private static func required<Value>(
        _ name: String, _ kind: Kind, _ field: Field<Value>, update: Update, compared: Bool,
        wrap: @escaping @Sendable (Value) -> LedgerValue, unwrap: @escaping @Sendable (LedgerValue) -> Value?
    ) -> Self {
        Self(name, kind, update: update, compared: compared, get: { wrap($0[keyPath: field]) }) { record, value in
            guard let unwrapped = value.flatMap(unwrap) else { throw LedgerColumnMismatch(column: name) }
            record[keyPath: field] = unwrapped
        }
    }

    static func text(_ name: String, _ field: Field<String?>, update: Update = .replace, compared: Bool = false) -> Self {
        optional(name, .text, field, update: update, compared: compared, wrap: LedgerValue.text, unwrap: \.text)
    }

    static func text(_ name: String, _ field: Field<String>, update: Update = .replace, compared: Bool = false) -> Self {
        required(name, .text, field, update: update, compared: compared, wrap: LedgerValue.text, unwrap: \.text)
    }

    /// A text column holding a string enumeration's raw value.
    static func text<Value: RawRepresentable<String> & Sendable>(_ name: String, _ field: Field<Value>, update: Update = .replace) -> Self {
        required(name, .text, field, update: update, compared: false, wrap: { .text($0.rawValue) }, unwrap: { $0.text.flatMap(Value.init) })
    }

    /// A smallint, integer or bigint column.
    static func integer<Value: FixedWidthInteger & Sendable>(
        _ name: String, _ kind: Kind, _ field: Field<Value?>, update: Update = .replace, compared: Bool = false
    ) -> Self {
        precondition([.smallint, .integer, .bigint].contains(kind), "\(name): not an integer kind")
        // A value the column cannot hold (a verified payload's number beyond smallint or integer)
        // is written as NULL: one such field must not fail the whole batch, on every rerun.
        let range: ClosedRange<Int64> =
            switch kind {
            case .smallint: Int64(Int16.min)...Int64(Int16.max)
            case .integer: Int64(Int32.min)...Int64(Int32.max)
            default: Int64.min...Int64.max
            }
        return Self(
            name, kind, update: update, compared: compared,
            get: { record in record[keyPath: field].flatMap { Int64(exactly: $0) }.flatMap { range.contains($0) ? .integer($0) : nil } }
        ) { record, value in
            guard let value else { record[keyPath: field] = nil; return }
            guard let number = value.integer.flatMap(Value.init(exactly:)) else { throw LedgerColumnMismatch(column: name) }
            record[keyPath: field] = number
        }
    }

    static func boolean(_ name: String, _ field: Field<Bool?>, update: Update = .replace, compared: Bool = false) -> Self {
        optional(name, .boolean, field, update: update, compared: compared, wrap: LedgerValue.boolean, unwrap: \.boolean)
    }

    static func time(_ name: String, _ field: Field<Date?>, update: Update = .replace, compared: Bool = false) -> Self {
        optional(name, .time, field, update: update, compared: compared, wrap: LedgerValue.time, unwrap: \.time)
    }

    static func time(_ name: String, _ field: Field<Date>, update: Update = .replace, compared: Bool = false) -> Self {
        required(name, .time, field, update: update, compared: compared, wrap: LedgerValue.time, unwrap: \.time)
    }

    static func uuid(_ name: String, _ field: Field<UUID?>, update: Update = .replace, compared: Bool = false) -> Self {
        optional(name, .uuid, field, update: update, compared: compared, wrap: LedgerValue.uuid, unwrap: \.uuid)
    }

    static func texts(_ name: String, _ field: Field<[String]?>, update: Update = .replace, compared: Bool = false) -> Self {
        optional(name, .textArray, field, update: update, compared: compared, wrap: LedgerValue.texts, unwrap: \.texts)
    }

    static func uuid(_ name: String, _ field: Field<UUID>, update: Update = .key) -> Self {
        required(name, .uuid, field, update: update, compared: false, wrap: LedgerValue.uuid, unwrap: \.uuid)
    }
}

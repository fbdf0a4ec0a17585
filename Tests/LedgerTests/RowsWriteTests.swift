import Foundation
import Testing

@testable import Ledger
import PostgresNIO

/// The batch statement binds its values by name (issue 49): twelve parameters, each a JSON
/// document of named values but the signed objects' bytes, whatever the tables gain.
@Suite struct RowsWriteTests {
    @Test func theBatchStatementSpellsTwelveParametersAndBindsEachOnce() throws {
        let sql = LedgerStore.RowsWrite.sql
        let spelled = Set(sql.matches(of: /\$(\d+)/).compactMap { Int($0.1) })
        #expect(spelled == Set(1...LedgerStore.RowsWrite.Parameter.allCases.count))
        #expect(LedgerStore.RowsWrite.bindingDataTypes.count <= 12)
        let statement = LedgerStore.RowsWrite(batch: LedgerBatch(cause: .history), runId: nil, checkpoint: nil)
        #expect(try statement.makeBindings().count == LedgerStore.RowsWrite.bindingDataTypes.count)
    }

    /// The statement's own fields: absent ones left out, bytes in lowercase hex, UUIDs as an array.
    @Test func fieldsAreWrittenByNameAndAbsentOnesLeftOut() throws {
        let uuid = UUID()
        let text = RowJSON.object([
            "a": .text("x\"y"), "b": .text(nil), "c": .integer(-5), "d": .boolean(true), "e": .hex([0x00, 0xAB, 0x7F]),
            "f": .hex(nil), "g": .uuids([uuid]),
        ])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(Set(object.keys) == ["a", "c", "d", "e", "g"])
        #expect(object["a"] as? String == "x\"y")
        #expect(object["c"] as? Int == -5)
        #expect(object["d"] as? Bool == true)
        #expect(object["e"] as? String == "00ab7f")
        #expect(object["g"] as? [String] == [uuid.uuidString])
    }

    /// A record's row carries the statement's fields beside its columns.
    @Test func aRecordsRowCarriesItsExtraFieldsBesideItsColumns() throws {
        var record = TransactionRecord.blank
        record.transactionId = "7"
        let text = RowJSON.array([record], extra: { ["object_key": .hex([UInt8(truncatingIfNeeded: $0 + 1)])] })
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        #expect(rows.first?["object_key"] as? String == "01")
        #expect(rows.first?["transaction_id"] as? String == "7")
    }

    /// The checkpoint's times travel as PostgresNIO binds a timestamptz, to the microsecond.
    @Test func aCheckpointTimeIsTheMicrosecondsABoundTimestamptzCarries() {
        let date = Date(timeIntervalSince1970: 1_700_000_000.123456)
        #expect(LedgerStore.RowsWrite.postgresMicroseconds(date) == Int64(date.timeIntervalSince(Date(timeIntervalSince1970: 946_684_800)) * 1_000_000))
        #expect(LedgerStore.RowsWrite.postgresMicroseconds(Date(timeIntervalSince1970: 946_684_801)) == 1_000_000)
    }
}

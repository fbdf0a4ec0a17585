import Foundation
import Testing

/// SQL is only ever built with bound parameters: postgres-nio's `PostgresQuery` string
/// interpolation sends every interpolated value as a parameter, so text can reach the server
/// unbound only through `PostgresQuery(unsafeSQL:)`. The sources use it in two reviewed places.
@Suite("SQL by construction")
struct SQLConstructionTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources")

    /// Where unbound SQL is allowed, and why.
    static let allowed: [String: String] = [
        // The migration files from sql/, embedded at build time: the project's own text, split into statements.
        "Ledger/Migrator.swift": "PostgresQuery(unsafeSQL: statement)",
        // The team's own facts query (refundRequests.facts), its values bound ($1…$6), run read only.
        "Ledger/LedgerStore+RefundFacts.swift": "PostgresQuery(unsafeSQL: query.",
    ]

    @Test func unboundSQLAppearsOnlyWhereTheMigrationFilesAreRun() throws {
        var found: [String] = []
        let files = FileManager.default.enumerator(at: Self.sources, includingPropertiesForKeys: nil)!
        for case let file as URL in files where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            let relative = String(file.path.dropFirst(Self.sources.path.count + 1))
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains("unsafeSQL") || line.contains("PostgresQuery(stringLiteral") || line.contains("simpleQuery(") {
                if let allowed = Self.allowed[relative], line.contains(allowed) { continue }
                found.append("\(relative):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(found.isEmpty, "SQL built from text: \(found)")
    }

    @Test func theScanSeesTheSources() throws {
        let migrator = try String(contentsOf: Self.sources.appendingPathComponent("Ledger/Migrator.swift"), encoding: .utf8)
        #expect(migrator.contains("PostgresQuery(unsafeSQL: statement)"), "the allowed use is where the scan expects it")
    }
}

import Foundation
import Testing

/// No SQL statement binds more than twelve positional parameters (issue 49): a statement that
/// needs more binds its values by name, one JSON document per table (`LedgerStore.RowsWrite`).
@Suite struct SQLParameterCountTests {
    static let limit = 12

    /// The parameters a string literal of Swift source binds: the highest `$n` when it spells
    /// them (a prepared statement's text, whose `\(…)` only build the text); the distinct
    /// `Parameter.name`s it interpolates when its placeholders come from a `Parameter` enum (the
    /// batch statement: `RowsWriteTests` checks the enum's size); else its interpolations but
    /// `\(unescaped: …)` (a `PostgresQuery` binds each).
    static func parameters(ofLiteral body: String) -> Int {
        let placeholders = body.matches(of: /\$(\d+)/).compactMap { Int($0.1) }
        if let highest = placeholders.max() { return highest }
        let named = Set(body.matches(of: /\\\(Parameter\.(\w+)/).map { String($0.1) })
        if !named.isEmpty { return named.count }
        return body.matches(of: /\\\((?!unescaped:)/).count
    }

    /// Every string literal of a source (`"""…"""` and one-line `"…"`) that reads as SQL, with its line.
    static func sqlLiterals(of source: String) -> [(line: Int, body: String)] {
        var found: [(Int, String)] = []
        let pattern = /"""(?s:(.*?))"""|"((?:[^"\\\n]|\\.)*)"/
        for match in source.matches(of: pattern) {
            let body = String(match.1 ?? match.2 ?? "")
            guard body.contains(/\b(SELECT|INSERT|UPDATE|DELETE|WITH)\b/) else { continue }
            found.append((source[..<match.range.lowerBound].count(where: { $0 == "\n" }) + 1, body))
        }
        return found
    }

    @Test func theCountReadsPlaceholdersAndBindings() {
        #expect(Self.parameters(ofLiteral: "SELECT $1::text, $13::jsonb, \\(name)") == 13)
        #expect(Self.parameters(ofLiteral: "SELECT \\(a), \\(b) FROM t WHERE \\(unescaped: column) = \\(c)") == 3)
        #expect(Self.parameters(ofLiteral: "SELECT \\(Parameter.a.sql), \\(Parameter.b.sql), \\(Parameter.a.sql), \\(other)") == 2)
        let source = "let q: PostgresQuery = \"SELECT \\(a) FROM t\"\nlet s = \"\"\"\n    UPDATE t SET a = $2\n    \"\"\"\nlet x = \"not sql\""
        #expect(Self.sqlLiterals(of: source).map(\.line) == [1, 2])
    }

    @Test func noStatementInSourcesBindsMoreThanTwelveParameters() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
        let files = (FileManager.default.subpaths(atPath: sources.path) ?? []).filter { $0.hasSuffix(".swift") }
        #expect(files.count > 100, "no sources found in \(sources.path)")
        var over: [String] = []
        var checked = 0
        for file in files where !file.hasPrefix("AppStoreSimulator/") {
            for (line, body) in Self.sqlLiterals(of: try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)) {
                checked += 1
                let count = Self.parameters(ofLiteral: body)
                if count > Self.limit { over.append("\(file):\(line) binds \(count)") }
            }
        }
        #expect(checked > 50, "only \(checked) statements found")
        #expect(over.isEmpty, "\(over)")
    }
}

import Crypto

/// One numbered migration file from `sql/` (`0001_ledger.sql`), embedded in the binary at
/// build time.
package struct Migration: Hashable, Sendable {
    package var version: Int
    package var name: String
    package var text: String

    /// SHA-256 of the file's exact text, recorded when applied; an applied file that was
    /// edited afterwards no longer matches, and `migrate` refuses to go on.
    package var checksum: String {
        SHA256.hash(data: Array(text.utf8)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// The checksums a ledger may have recorded for this file: its own, and those of the earlier
    /// texts it amends. A file amended after release (a fix that must hold when the file runs
    /// again, say) names each earlier text's checksum on a comment line of its own,
    /// `-- amends checksum <hex>`, and says why beside it; a ledger that applied the earlier
    /// text is then not refused.
    package var acceptedChecksums: Set<String> {
        var accepted: Set<String> = [checksum]
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            if words.count == 4, words[0] == "--", words[1] == "amends", words[2] == "checksum" { accepted.insert(String(words[3])) }
        }
        return accepted
    }

    package var statements: [String] { SQLScript.statements(in: text) }

    package init(version: Int, name: String, text: String) {
        self.version = version
        self.name = name
        self.text = text
    }

    /// Reads the version from a file name of the form `NNNN_description.sql`.
    package init?(fileName: String, text: String) {
        let digits = fileName.prefix(while: { $0.isASCII && $0.isNumber })
        guard !digits.isEmpty, let version = Int(digits), fileName.hasSuffix(".sql") else { return nil }
        self.init(version: version, name: fileName, text: text)
    }

    /// The migrations this build carries, in order.
    package static let bundled: [Migration] = embeddedMigrationFiles
        .compactMap { Migration(fileName: $0.name, text: $0.text) }
        .sorted { $0.version < $1.version }
}

/// A migration the database says it applied.
package struct AppliedMigration: Hashable, Sendable {
    package var version: Int
    package var name: String
    package var checksum: String

    package init(version: Int, name: String, checksum: String) {
        self.version = version
        self.name = name
        self.checksum = checksum
    }
}

/// What `migrate` will do, decided from the files and the database's record alone.
package enum MigrationPlan: Hashable, Sendable {
    /// Apply these, in order (possibly none: up to date).
    case apply([Migration])
    /// Do nothing, and say why.
    case refuse(String)

    package init(available: [Migration], applied: [AppliedMigration]) {
        let byVersion = Dictionary(available.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
        if byVersion.count != available.count {
            self = .refuse("two migration files share a version number")
            return
        }
        for record in applied.sorted(by: { $0.version < $1.version }) {
            guard let file = byVersion[record.version] else {
                self = .refuse(
                    "the database has migration \(record.name) applied, which this build does not have: "
                        + "it was migrated by a newer appstore-reconcile"
                )
                return
            }
            if !file.acceptedChecksums.contains(record.checksum) {
                self = .refuse(
                    "migration \(record.name) was edited after it was applied (checksum \(record.checksum.prefix(12))… "
                        + "recorded, \(file.checksum.prefix(12))… now); restore the original file and add a new migration instead"
                )
                return
            }
        }
        let appliedVersions = Set(applied.map(\.version))
        self = .apply(available.filter { !appliedVersions.contains($0.version) }.sorted { $0.version < $1.version })
    }
}

import Foundation
import Testing

/// The pure targets stay pure: the decisions, the ledger's records and the API's values import no
/// database driver, no NIO, no HTTP client, no server. (Package.swift gives these targets no such
/// dependency; this keeps a later edit of it from slipping one in unnoticed.)
@Suite struct TargetBoundaryTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources")

    /// The modules each pure target may import.
    static let allowed: [String: Set<String>] = [
        "Decisions": ["Foundation", "SignedData", "AppStoreServerModel", "LedgerModel", "FailureKind", "Crypto", "AppReceipt"],
        // App receipts read from their bytes: SwiftASN1 only.
        "AppReceipt": ["Foundation", "SwiftASN1"],
        "FailureKind": [],
        "LedgerModel": ["Foundation", "Crypto", "SignedData"],
        "AppStoreServerModel": ["Foundation", "SignedData"],
        // A run's result: values, and the spool files its long lists live in (ReportList).
        "RunResults": ["Foundation", "Synchronization", "Glibc", "Darwin", "Decisions", "LedgerModel", "SignedData", "AppStoreServerModel"],
    ]

    /// The modules `source` imports (`import X`, `@_exported import X`, `import struct X.Y`).
    static func imports(of source: String) -> Set<String> {
        var modules: Set<String> = []
        for line in source.split(separator: "\n") {
            let words = line.split(separator: " ").filter { !$0.hasPrefix("@") }
            guard words.first == "import", words.count >= 2 else { continue }
            let path = words.count >= 3 && ["struct", "class", "enum", "protocol", "func", "typealias", "var", "let"].contains(words[1]) ? words[2] : words[1]
            modules.insert(String(path.split(separator: ".")[0]))
        }
        return modules
    }

    @Test func theImportsOfASourceAreRead() {
        #expect(Self.imports(of: "import Foundation\n@_exported import LedgerModel\nimport struct NIOCore.ByteBuffer\n// import Nope\n") == ["Foundation", "LedgerModel", "NIOCore"])
    }

    @Test(arguments: ["Decisions", "LedgerModel", "AppStoreServerModel", "FailureKind", "RunResults", "AppReceipt"])
    func aPureTargetImportsNoIO(target: String) throws {
        let folder = Self.sources.appendingPathComponent(target)
        // Every file, those in subfolders (Decisions/GapRules/) included.
        let files = (FileManager.default.subpaths(atPath: folder.path) ?? []).filter { $0.hasSuffix(".swift") }
        #expect(!files.isEmpty, "no sources found in \(folder.path)")
        for file in files {
            let imported = Self.imports(of: try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8))
            let stray = imported.subtracting(Self.allowed[target] ?? [])
            #expect(stray.isEmpty, "\(target)/\(file) imports \(stray.sorted())")
        }
    }

    /// The passes fill a run's result and render nothing: the reports are the composition
    /// root's to call (issue 49, point 1).
    @Test func thePassesImportNoRenderer() throws {
        let folder = Self.sources.appendingPathComponent("Reconciliation")
        for file in (FileManager.default.subpaths(atPath: folder.path) ?? []).filter({ $0.hasSuffix(".swift") }) {
            let imported = Self.imports(of: try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8))
            #expect(imported.isDisjoint(with: ["Reports", "Prometheus", "CoreMetrics", "ReconcileCLI", "Deployment"]), "Reconciliation/\(file) imports \(imported.sorted())")
        }
    }

    /// The command line parses and calls: the API client, the verifier and the ledger's store
    /// are made by the composition root (`Deployment`), never by a command (issue 49, point 5).
    @Test func theCommandsConstructNoClientVerifierNorStore() throws {
        let folder = Self.sources.appendingPathComponent("ReconcileCLI")
        let files = (FileManager.default.subpaths(atPath: folder.path) ?? []).filter { $0.hasSuffix(".swift") }
        #expect(!files.isEmpty)
        for file in files {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for constructor in ["AppStoreServerAPIClient(", "SignedDataVerifier(", "LedgerStore(", "pairs.count == 1"] {
                #expect(!text.contains(constructor), "ReconcileCLI/\(file) spells \(constructor)")
            }
        }
    }
}

import Foundation
import Testing

/// The rooms of the package, judged from the manifest (`PackageGraph`: `swift package dump-package`):
/// every module a source imports is a dependency its target declares, so that the declared graph is
/// the real one; the pure targets declare no I/O; PostgreSQL's driver belongs to the ledger.
@Suite struct TargetBoundaryTests {
    static let sources = PackageGraph.root.appendingPathComponent("Sources")
    static let graph = Result { try PackageGraph.load() }

    /// Modules of the toolchain, which no target declares.
    static let toolchain: Set<String> = ["Foundation", "FoundationEssentials", "Dispatch", "Synchronization", "Glibc", "Musl", "Darwin", "Testing", "XCTest"]

    /// The targets without I/O: values and decisions, tested without a database or a network.
    static let pure: Set<String> = ["SignedData", "AppStoreServerModel", "AppReceipt", "FailureKind", "LedgerModel", "Decisions", "RemedyDecisions", "RunResults", "RevenueMetrics", "LifecycleEvents"]
    /// The libraries a pure target may use: cryptography, ASN.1 and certificates, atomics.
    static let pureProducts: Set<String> = ["Crypto", "SwiftASN1", "X509", "Atomics"]

    /// The targets that may use PostgreSQL's driver: the ledger, and the test tooling around it.
    static let postgresTargets: Set<String> = ["Ledger", "LedgerSupport", "TestSupport", "ReconcileBenchmark"]
    /// Still holding a `PostgresClient` (issue 63, point 4, not done yet): `serve` makes its own client
    /// and reads /readyz through it, Deployment runs it as a service of the ServiceGroup, and the
    /// demo fills the team's facts table with SQL of its own. Moving each into Ledger shortens this list;
    /// nothing may join it.
    static let postgresStillOutside: Set<String> = ["Deployment", "LiveReceiver", "AppStoreReconcileDev"]

    @Test func theImportsOfASourceAreReadFromItsLeadingLines() {
        let source = "// a comment\nimport Foundation\n@_exported import LedgerModel\ninternal import struct NIOCore.ByteBuffer\n#if canImport(Glibc)\nimport Glibc\n#endif\n\nstruct A {}\nlet python = \"import json\"\n"
        #expect(PackageGraph.imports(of: source) == ["Foundation", "LedgerModel", "NIOCore", "Glibc"])
    }

    @Test func theManifestIsReadWithEveryTarget() throws {
        let graph = try Self.graph.get()
        #expect(graph.targets.count > 30, "\(graph.targets.keys.sorted())")
        #expect(graph.targets["Decisions"]?.dependencies.contains("LedgerModel") == true)
        #expect(graph.targets["Ledger"]?.dependencies.contains("PostgresNIO") == true, "a product is named too")
    }

    /// A module reached only through another target's dependencies would leave the declared graph
    /// a copy that lies: every import is declared.
    @Test func everyModuleASourceImportsIsADependencyItsTargetDeclares() throws {
        let undeclared = try Self.undeclaredImports(try Self.graph.get())
        #expect(undeclared.isEmpty, "\(undeclared)")
        // The same check of a manifest that forgot one: Ledger's sources import NIOCore.
        var forgetful = try Self.graph.get()
        forgetful.targets["Ledger"]?.dependencies.remove("NIOCore")
        #expect(try Self.undeclaredImports(forgetful).contains { $0.hasPrefix("Ledger/") && $0.hasSuffix("imports [\"NIOCore\"]") })
    }

    static func undeclaredImports(_ graph: PackageGraph) throws -> [String] {
        var undeclared: [String] = []
        for target in graph.targets.values where target.type != "plugin" {
            for (file, modules) in try graph.imports(of: target) {
                let stray = modules.subtracting(target.dependencies).subtracting(Self.toolchain).subtracting([target.name])
                if !stray.isEmpty { undeclared.append("\(target.name)/\(file) imports \(stray.sorted())") }
            }
        }
        return undeclared.sorted()
    }

    @Test func aPureTargetDeclaresNothingButPureTargetsAndPureLibraries() throws {
        let graph = try Self.graph.get()
        for name in Self.pure.sorted() {
            let target = try #require(graph.targets[name], "\(name) is a target")
            let stray = target.dependencies.subtracting(Self.pure).subtracting(Self.pureProducts)
            #expect(stray.isEmpty, "\(name) depends on \(stray.sorted())")
        }
    }

    @Test func onlyTheLedgerAndItsTestToolingUsePostgreSQLsDriver() throws {
        let graph = try Self.graph.get()
        let using = Set(graph.targets.values.filter { $0.type != "test" && $0.dependencies.contains("PostgresNIO") }.map(\.name))
        #expect(using.subtracting(Self.postgresTargets).subtracting(Self.postgresStillOutside).isEmpty, "\(using.sorted())")
        #expect(Self.postgresStillOutside.isSubset(of: using), "one moved into Ledger: take it off the list")
    }

    /// The passes fill a run's result and render nothing: the reports are the composition
    /// root's to call (issue 49, point 1).
    @Test func thePassesDependOnNoRenderer() throws {
        let reconciliation = try #require(try Self.graph.get().targets["Reconciliation"])
        #expect(reconciliation.dependencies.isDisjoint(with: ["Reports", "Prometheus", "CoreMetrics", "ReconcileCLI", "Deployment"]), "\(reconciliation.dependencies.sorted())")
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

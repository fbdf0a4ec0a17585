import Foundation

/// The package's targets and what each declares it depends on, as `swift package dump-package`
/// reads them from Package.swift: the boundary tests judge the manifest itself, not a copy of it.
struct PackageGraph: Sendable {
    struct Target: Decodable, Sendable {
        var name: String
        var type: String
        var path: String?
        /// The targets and products it names (a product by its name, which is its module's).
        var dependencies: Set<String>

        enum CodingKeys: String, CodingKey { case name, type, path, dependencies }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            type = try container.decode(String.self, forKey: .type)
            path = try container.decodeIfPresent(String.self, forKey: .path)
            // Each dependency is one of {"byName": [name, condition]}, {"target": [...]},
            // {"product": [name, package, moduleAliases, condition]}: the name comes first.
            let entries = try container.decode([[String: [Name?]]].self, forKey: .dependencies)
            dependencies = Set(entries.compactMap { $0.values.first?.first??.text })
        }
    }

    /// An element of a dependency's array: its first is the name, the others anything.
    struct Name: Decodable, Sendable {
        var text: String?
        init(from decoder: any Decoder) throws {
            text = try? decoder.singleValueContainer().decode(String.self)
        }
    }

    var targets: [String: Target]

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The source folder of `target`.
    func folder(of target: Target) -> URL {
        Self.root.appendingPathComponent(target.path ?? ((target.type == "test" ? "Tests/" : "Sources/") + target.name))
    }

    /// Reads the manifest of this checkout. A scratch path of its own: `swift test`, which runs
    /// this, holds the lock of `.build`.
    static func load() throws -> PackageGraph {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("dump-package-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift", "package", "--package-path", root.path, "--scratch-path", scratch.path, "dump-package"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw DumpFailed(status: process.terminationStatus) }
        struct Manifest: Decodable { var targets: [Target] }
        let manifest = try JSONDecoder().decode(Manifest.self, from: data)
        return PackageGraph(targets: Dictionary(manifest.targets.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first }))
    }

    struct DumpFailed: Error, CustomStringConvertible {
        var status: Int32
        var description: String { "swift package dump-package exited \(status)" }
    }

    /// The modules a source imports (`import X`, `@_exported import X`, `internal import X`,
    /// `import struct X.Y`), read from its leading lines only: the imports come before the first
    /// declaration, and a string further down may hold another language's `import`.
    static func imports(of source: String) -> Set<String> {
        var modules: Set<String> = []
        for line in source.split(separator: "\n", omittingEmptySubsequences: true) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("//") || trimmed.hasPrefix("#if") || trimmed.hasPrefix("#else") || trimmed.hasPrefix("#elseif")
                || trimmed.hasPrefix("#endif")
            {
                continue
            }
            var words = trimmed.split(separator: " ").filter { !$0.hasPrefix("@") }
            if let first = words.first, ["public", "package", "internal", "fileprivate", "private"].contains(first) { words.removeFirst() }
            guard words.first == "import", words.count >= 2 else { break }
            let kinds: Set<Substring> = ["struct", "class", "enum", "protocol", "func", "typealias", "var", "let"]
            let path = words.count >= 3 && kinds.contains(words[1]) ? words[2] : words[1]
            modules.insert(String(path.split(separator: ".")[0]))
        }
        return modules
    }

    /// Every module the sources of `target` import.
    func imports(of target: Target) throws -> [(file: String, modules: Set<String>)] {
        let folder = folder(of: target)
        let files = (FileManager.default.subpaths(atPath: folder.path) ?? []).filter { $0.hasSuffix(".swift") }.sorted()
        return try files.map { file in
            (file, Self.imports(of: try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)))
        }
    }
}

import Foundation
import TestSupport
import Testing
import ThrowawayPostgres

/// The README and the guides in docs/ cannot drift from the code: every command line they show
/// names a subcommand and flags the built binaries have, every exit code they document is one
/// `ExitStatus` defines (and every one it defines is documented), and every relative link and
/// anchor resolves. (Every metric name they mention is checked against a real exposition in
/// `MetricsTests.everyMetricNameTheDocsNameIsExposed`.)
@Suite("The docs against the code")
struct DocsDriftTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// README.md and every Markdown file in docs/, as paths from the repository's top.
    static func documents() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        return ["README.md"] + docs
    }

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// One command line a document shows: the binary, its subcommand (nil: none), its flags.
    struct CommandLine: Hashable, CustomStringConvertible {
        var binary: String
        var subcommand: String?
        var flags: [String]
        var document: String
        var description: String { "\(document): \(binary) \(subcommand ?? "") \(flags.joined(separator: " "))" }
    }

    /// The command lines of a Markdown text: in fenced code blocks, lines (continuations joined,
    /// a leading `$ ` dropped, pipelines and `&&` lists split) whose word is `appstore-reconcile`
    /// or `appstore-reconcile-dev` (or a path ending in one); and inline code spans that begin so.
    static func commandLines(in markdown: String, document: String) -> [CommandLine] {
        var candidates: [String] = []
        var inBlock = false
        var pending = ""
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("```") {
                inBlock.toggle()
                pending = ""
                continue
            }
            if inBlock {
                if trimmed.hasSuffix("\\") {
                    pending += trimmed.dropLast() + " "
                    continue
                }
                candidates.append(pending + trimmed)
                pending = ""
            } else {
                candidates += line.matches(of: /`(appstore-reconcile[^`]*)`/).map { String($0.output.1) }
            }
        }
        var found: [CommandLine] = []
        for candidate in candidates {
            var line = candidate
            if line.hasPrefix("$ ") { line.removeFirst(2) }
            if line.hasPrefix("#") { continue }
            for part in line.split(whereSeparator: { $0 == "|" || $0 == ";" }).flatMap({ $0.components(separatedBy: "&&") }) {
                let words = part.split(separator: " ").map(String.init)
                guard let index = words.firstIndex(where: { $0 == "appstore-reconcile" || $0 == "appstore-reconcile-dev" || $0.hasSuffix("/appstore-reconcile") })
                else { continue }
                let binary = words[index].hasSuffix("-dev") ? "appstore-reconcile-dev" : "appstore-reconcile"
                let rest = words[(index + 1)...].prefix { !$0.hasPrefix("#") && $0 != ">>" && $0 != ">" && $0 != "2>&1" }
                let first = rest.first
                // A placeholder (<command>, COMMAND, …) or an ellipsis is prose, not a command.
                let subcommand = first.flatMap { word -> String? in
                    word.hasPrefix("-") || !word.allSatisfy({ $0.isLowercase || $0 == "-" }) ? nil : word
                }
                if let first, !first.hasPrefix("-"), subcommand == nil { continue }
                let flags = rest.filter { $0.hasPrefix("--") && $0.count > 2 }.map { flag in
                    String(flag.split(separator: "=", maxSplits: 1)[0]).trimmingCharacters(in: CharacterSet(charactersIn: "`,.;)\"'"))
                }
                found.append(CommandLine(binary: binary, subcommand: subcommand, flags: flags, document: document))
            }
        }
        return found
    }

    @Test func everyCommandLineTheDocsShowNamesASubcommandAndFlagsTheBinaryHas() async throws {
        var lines: [CommandLine] = []
        for document in try Self.documents() { lines += Self.commandLines(in: try Self.text(document), document: document) }
        #expect(lines.count >= 40, "the docs show the commands: \(lines.count) found")
        #expect(Set(lines.compactMap(\.subcommand)).count >= 10, "most subcommands appear")
        var help: [String: String] = [:]
        for line in lines {
            let key = line.binary + " " + (line.subcommand ?? "")
            if help[key] == nil {
                let path = line.binary == "appstore-reconcile-dev" ? BuiltBinary.devPath : BuiltBinary.path
                let result = try await BuiltBinary.run((line.subcommand.map { [$0] } ?? []) + ["--help"], binary: path)
                help[key] = result.exitCode == 0 ? result.standardOutput : ""
            }
            let text = help[key] ?? ""
            #expect(!text.isEmpty, "\(line): no such subcommand")
            for flag in line.flags where !text.isEmpty {
                #expect(text.contains(flag + " ") || text.contains(flag + "\n") || text.contains(flag + ",") || text.contains(flag + "=") || text.contains(flag + "]"),
                        "\(line): \(flag) is not in `\(key) --help`")
            }
        }
    }

    /// The exit codes `ExitStatus` defines (`static let name: Int32 = N`), from its source.
    static func definedExitCodes() throws -> Set<Int> {
        let source = try text("Sources/ReconcileCLI/ExitStatus.swift")
        return Set(source.matches(of: /static let [A-Za-z]+: Int32 = (\d+)/).compactMap { Int($0.output.1) })
    }

    @Test func theExitCodesDocumentedAreExactlyTheOnesTheToolDefines() throws {
        let defined = try Self.definedExitCodes()
        #expect(defined.count >= 8)
        let guide = try Self.text("docs/operations.md")
        let section = guide.components(separatedBy: "## Exit codes").dropFirst().first?.components(separatedBy: "\n## ").first ?? ""
        let documented = Set(section.matches(of: /\n\| (\d+) \|/).compactMap { Int($0.output.1) })
        #expect(documented == defined, "documented \(documented.sorted()), defined \(defined.sorted())")
    }

    /// GitHub's anchor of a heading: lower case, spaces as hyphens, other punctuation left out.
    static func anchor(of heading: Substring) -> String {
        var anchor = ""
        for character in heading.drop(while: { $0 == "#" }).trimmingCharacters(in: .whitespaces).lowercased() {
            if character == " " {
                anchor.append("-")
            } else if character.isLetter || character.isNumber || character == "-" || character == "_" {
                anchor.append(character)
            }
        }
        return anchor
    }

    /// The anchors of a Markdown text's headings (outside code blocks), with GitHub's -1, -2 for repeats.
    static func anchors(of markdown: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        var inBlock = false
        for line in markdown.split(separator: "\n") {
            if line.hasPrefix("```") { inBlock.toggle() }
            guard !inBlock, line.hasPrefix("#") else { continue }
            let base = anchor(of: line)
            let count = seen[base, default: 0]
            seen[base] = count + 1
            anchors.insert(count == 0 ? base : "\(base)-\(count)")
        }
        return anchors
    }

    @Test func everyRelativeLinkAndAnchorInTheDocsResolves() throws {
        var checked = 0
        for document in try Self.documents() {
            let markdown = try Self.text(document)
            let directory = document.split(separator: "/").dropLast().map(String.init)
            for link in markdown.matches(of: /\]\(([^)\s]+)\)/) {
                let target = String(link.output.1)
                if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("mailto:") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                var components = directory
                for component in parts[0].split(separator: "/") {
                    if component == ".." { _ = components.popLast() } else if component != "." { components.append(String(component)) }
                }
                let relative = parts[0].isEmpty ? document : components.joined(separator: "/")
                let url = Self.root.appendingPathComponent(relative)
                #expect(FileManager.default.fileExists(atPath: url.path), "\(document): \(target): no file \(relative)")
                if parts.count == 2, relative.hasSuffix(".md"), let text = try? String(contentsOf: url, encoding: .utf8) {
                    #expect(Self.anchors(of: text).contains(parts[1]), "\(document): \(target): no heading #\(parts[1]) in \(relative)")
                }
                checked += 1
            }
        }
        #expect(checked >= 30, "\(checked) links")
    }

    /// The check itself: a renamed flag, an unknown subcommand and a placeholder are told apart.
    @Test func theCommandLineReaderFindsSubcommandsAndFlags() {
        let markdown = """
            Run `appstore-reconcile run --dry-run` first.
            ```sh
            $ appstore-reconcile nightly --config /etc/a.yaml \\
                --report-dir /var/lib/r >> /var/log/a.log 2>&1
            appstore-reconcile-dev simulate --deployment x | head
            appstore-reconcile <command> --help
            ```
            """
        let lines = Self.commandLines(in: markdown, document: "x.md")
        #expect(lines.map(\.description) == [
            "x.md: appstore-reconcile run --dry-run",
            "x.md: appstore-reconcile nightly --config --report-dir",
            "x.md: appstore-reconcile-dev simulate --deployment",
        ])
    }
}

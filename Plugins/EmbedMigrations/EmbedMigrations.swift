import Foundation
import PackagePlugin

/// Embeds the numbered migrations in `sql/` into the target that uses this plugin, so the
/// `appstore-reconcile` binary carries its schema and needs no files beside it at run time.
/// The files in `sql/` stay the single source: operators may also apply them with `psql -f`.
@main
struct EmbedMigrations: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let directory = context.package.directoryURL.appending(path: "sql")
        let files = try FileManager.default
            .contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "sql" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedMigrations.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(files.count) SQL migrations",
                executable: try context.tool(named: "MigrationEmbedder").url,
                arguments: [output.path] + files.map(\.path),
                inputFiles: files,
                outputFiles: [output]
            )
        ]
    }
}

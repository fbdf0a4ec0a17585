package import Foundation
package import RunResults

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a run's report files go. Reports name customers (`appAccountToken`s, transaction IDs):
/// the directories the tool creates for them are 0700 and the files 0600, whatever the umask.
package enum ReportFiles {
    /// Creates `directory` and any missing parents, 0700 (an existing one is left as it is).
    static func createPrivateDirectory(_ directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// `PREFIX-YYYYMMDDTHHMMSSZ` (with `-dry-run` for a dry run), in the working directory.
    package static func defaultDirectory(prefix: String, dryRun: Bool, now: Date = Date()) -> String {
        let stamp = now.formatted(Date.ISO8601FormatStyle().year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
        return "\(prefix)-\(stamp)\(dryRun ? "-dry-run" : "")"
    }

    /// Writes the report's files to `directory` (default: `appstore-reconcile-report-…`) and
    /// returns where.
    package static func write(_ report: RecoveryReport, to directory: String?) throws -> String {
        let path = directory ?? defaultDirectory(prefix: "appstore-reconcile-report", dryRun: report.isDryRun)
        try report.writeFiles(to: path)
        return path
    }

    /// Writes small reports already in memory (`detect-outage`'s), each file renamed into place
    /// when complete, into `directory` (created if needed).
    package static func write(_ files: KeyValuePairs<String, String>, to directory: String) throws {
        try createPrivateDirectory(directory)
        for (name, text) in files {
            try BufferedTextFile.write(directory + "/" + name) { $0.write(text) }
        }
    }
}

extension RecoveryReport {
    /// Writes `report.md`, `report.json` and `report.html` into `directory` (created if needed), each streamed
    /// from the report's lists through a buffered file and renamed into place when complete: a
    /// reader never sees half a report, and writing one does not need the whole of it in memory.
    package func writeFiles(to directory: String) throws {
        try ReportFiles.createPrivateDirectory(directory)
        for list in [missed.checkWritten, rejected.checkWritten, customers.checkWritten, repairs.checkWritten] { try list() }
        try BufferedTextFile.write(directory + "/report.md") { file in
            var first = true
            writeMarkdown { line in
                file.write(first ? line : "\n" + line)
                first = false
            }
        }
        try BufferedTextFile.write(directory + "/report.json") { file in
            try writeJSON { file.write($0) }
        }
        try BufferedTextFile.write(directory + "/report.html") { file in
            writeHTML { file.write($0) }
        }
    }
}

/// A text file written through stdio's buffer, then renamed over `path`.
final class BufferedTextFile {
    private let stream: UnsafeMutablePointer<FILE>
    private var failed = false

    private init(stream: UnsafeMutablePointer<FILE>) {
        self.stream = stream
    }

    func write(_ text: String) {
        guard !failed else { return }
        var text = text
        text.withUTF8 { bytes in
            if !bytes.isEmpty, fwrite(bytes.baseAddress, 1, bytes.count, stream) != bytes.count { failed = true }
        }
    }

    static func write(_ path: String, _ body: (BufferedTextFile) throws -> Void) throws {
        let temporary = path + ".partial"
        // Opened 0600 (fopen would create it 0666 less the umask: readable by others).
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0, fchmod(descriptor, 0o600) == 0, let stream = fdopen(descriptor, "w") else {
            let reason = String(cString: strerror(errno))
            if descriptor >= 0 { close(descriptor) }
            throw ReportListError(description: "cannot write \(temporary): \(reason)")
        }
        let file = BufferedTextFile(stream: stream)
        do {
            try body(file)
        } catch {
            fclose(stream)
            unlink(temporary)
            throw error
        }
        let closed = fclose(stream) == 0
        guard closed, !file.failed else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw ReportListError(description: "cannot write \(path): \(reason)")
        }
        guard rename(temporary, path) == 0 else {
            throw ReportListError(description: "cannot move \(temporary) to \(path): \(String(cString: strerror(errno)))")
        }
    }
}

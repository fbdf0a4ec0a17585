import Crypto
package import Decisions
import Foundation

/// An import's input, read once before the import starts: its key (the SHA-256 of its kind and
/// bytes) and its number of lines, for the checkpoint and the progress line. Standard input is
/// copied to a file only its owner can read (the reports name nothing of it), removed when the
/// import ends; a file is read where it is. Either way the input is streamed a block at a time:
/// memory stays flat whatever its size.
package struct ImportInput: Sendable {
    package var kind: ImportKind
    package var path: String
    package var sha256: String
    package var lines: Int
    /// A copy of standard input, to be removed when the import ends.
    package var isCopy: Bool

    package enum Source: Sendable, Equatable {
        case file(String)
        case standardInput

        /// A regular file, which can be read again from its start.
        var isRegularFile: Bool {
            guard case .file(let path) = self, let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return false }
            return attributes[.type] as? FileAttributeType == .typeRegular
        }
    }

    static let blockSize = 1 << 16

    /// Reads `source` through once (copying standard input aside) for its key and line count.
    package static func prepare(_ source: Source, kind: ImportKind, temporaryDirectory: String = NSTemporaryDirectory()) throws -> ImportInput {
        var hasher = SHA256()
        hasher.update(data: Array("\(kind.rawValue)\n".utf8))
        var lines = 0
        var last: UInt8 = 10
        let input: FileHandle
        var copy: (handle: FileHandle, path: String)?
        switch source {
        case .file(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else { throw ImportInputError(description: "cannot read \(path)") }
            input = handle
        case .standardInput:
            input = FileHandle.standardInput
        }
        // What cannot be read twice (standard input, a pipe, `<(…)`, a device) is copied aside.
        if !source.isRegularFile {
            let path = (temporaryDirectory as NSString).appendingPathComponent("appstore-reconcile-import-\(UUID().uuidString)")
            guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
                let handle = FileHandle(forWritingAtPath: path)
            else { throw ImportInputError(description: "cannot copy the input to \(temporaryDirectory)") }
            copy = (handle, path)
        }
        defer {
            if case .file = source { try? input.close() }
            try? copy?.handle.close()
        }
        do {
            while let block = try input.read(upToCount: blockSize), !block.isEmpty {
                hasher.update(data: block)
                try copy?.handle.write(contentsOf: block)
                lines += block.reduce(0) { $0 + ($1 == 10 ? 1 : 0) }
                last = block.last ?? last
            }
        } catch {
            if let copy { try? FileManager.default.removeItem(atPath: copy.path) }
            throw ImportInputError(description: "reading the input: \(error)")
        }
        if last != 10 { lines += 1 }
        let digest = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        if let copy { return ImportInput(kind: kind, path: copy.path, sha256: digest, lines: lines, isCopy: true) }
        guard case .file(let path) = source else { throw ImportInputError(description: "the input was not copied") }
        return ImportInput(kind: kind, path: path, sha256: digest, lines: lines, isCopy: false)
    }

    /// Removes the copy of standard input, if one was made.
    package func removeCopy() {
        if isCopy { try? FileManager.default.removeItem(atPath: path) }
    }

    /// The input's lines, numbered from 1, a block at a time; a line longer than
    /// `ImportLine.maximumLength` comes as nil (and is not held).
    func readLines() throws -> InputLines {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw ImportInputError(description: "cannot read \(path)") }
        return InputLines(handle: handle)
    }
}

/// The lines of a file, read a block at a time.
final class InputLines {
    private let handle: FileHandle
    private var buffer: [UInt8] = []
    private var start = 0
    private var number = 0
    private var atEnd = false
    private var overlong = false

    init(handle: FileHandle) {
        self.handle = handle
    }

    deinit { try? handle.close() }

    /// The next line (its number, and its text or nil when too long), or nil at the end.
    func next() throws -> (number: Int, text: Substring?)? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 10) {
                let bytes = buffer[start..<newline]
                start = newline + 1
                number += 1
                if overlong {
                    overlong = false
                    return (number, nil)
                }
                return (number, Substring(String(decoding: bytes, as: UTF8.self)))
            }
            if atEnd {
                guard start < buffer.count || overlong else { return nil }
                let bytes = buffer[start...]
                start = buffer.count
                number += 1
                defer { overlong = false }
                return (number, overlong ? nil : Substring(String(decoding: bytes, as: UTF8.self)))
            }
            // Keep what is left of the line in hand; drop it once it is too long to use.
            buffer.removeFirst(start)
            start = 0
            if buffer.count > ImportLine.maximumLength {
                overlong = true
                buffer.removeAll(keepingCapacity: true)
            }
            guard let block = try handle.read(upToCount: ImportInput.blockSize), !block.isEmpty else {
                atEnd = true
                continue
            }
            buffer.append(contentsOf: block)
        }
    }
}

/// The input could not be read.
package struct ImportInputError: Error, CustomStringConvertible, Sendable {
    package var description: String
}

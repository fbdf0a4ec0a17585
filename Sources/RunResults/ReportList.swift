import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One list of a report (missed notifications, rejected payloads, changed customers, repairs).
/// While a run goes, the list lives in a spool file, a line of JSON per entry, and is read back
/// by streaming: a run's memory does not grow with the size of the outage. A report decoded from
/// JSON keeps its lists in memory. The spool file is unlinked as soon as it is created and used
/// through its descriptor: nothing is left behind however the process ends (even SIGKILL).
package final class ReportList<Element: Codable & Sendable>: Sendable, Sequence {
    private struct Spool {
        var descriptor: Int32
        /// Encoded lines not yet written.
        var pending: [UInt8] = []
        var encoder = JSONEncoder()
    }

    private enum Storage {
        case memory([Element])
        case spool(Spool)
    }

    private struct State {
        var storage: Storage
        var count: Int
        /// Set when the spool could not be written: reading the list then fails loudly.
        var failure: String?
    }

    private let state: Mutex<State>

    /// How many encoded bytes are kept before they are written out.
    static var flushThreshold: Int { 64 * 1024 }

    /// An empty list backed by a new spool file in the temporary directory ($TMPDIR).
    package init() throws {
        let directory = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(directory)/appstore-reconcile-report-XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw ReportListError(description: "cannot create a spool file for the report in \(directory): \(String(cString: strerror(errno)))")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        state = Mutex(State(storage: .spool(Spool(descriptor: descriptor)), count: 0))
    }

    /// A list held in memory (a decoded report, a small `repair`).
    package init(_ elements: [Element]) {
        state = Mutex(State(storage: .memory(elements), count: elements.count))
    }

    deinit {
        state.withLock { state in
            if case .spool(let spool) = state.storage { close(spool.descriptor) }
        }
    }

    package var count: Int { state.withLock { $0.count } }
    package var isEmpty: Bool { count == 0 }
    package var first: Element? {
        var iterator = makeIterator()
        return iterator.next()
    }

    /// Adds an entry at the end.
    package func append(_ element: Element) {
        state.withLock { state in
            switch state.storage {
            case .memory(var elements):
                state.storage = .memory([])
                elements.append(element)
                state.storage = .memory(elements)
            case .spool(var spool):
                do {
                    spool.pending.append(contentsOf: try spool.encoder.encode(element))
                    spool.pending.append(UInt8(ascii: "\n"))
                } catch {
                    state.failure = "an entry of the report could not be encoded: \(error)"
                }
                if spool.pending.count >= Self.flushThreshold { Self.flush(&spool, failure: &state.failure) }
                state.storage = .spool(spool)
            }
            state.count += 1
        }
    }

    private static func flush(_ spool: inout Spool, failure: inout String?) {
        var offset = 0
        spool.pending.withUnsafeBytes { bytes in
            while offset < bytes.count {
                let written = write(spool.descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = "the report's spool file could not be written: \(String(cString: strerror(errno)))"
                    return
                }
                offset += written
            }
        }
        spool.pending.removeAll(keepingCapacity: true)
    }

    /// What iterating reads: the entries in memory, or the spool file's descriptor (flushed first).
    private func source() -> (elements: [Element]?, descriptor: Int32?, failure: String?) {
        state.withLock { state in
            switch state.storage {
            case .memory(let elements):
                return (elements, nil, state.failure)
            case .spool(var spool):
                Self.flush(&spool, failure: &state.failure)
                state.storage = .spool(spool)
                return (nil, spool.descriptor, state.failure)
            }
        }
    }

    /// Checks that every entry reached the spool: a disk that filled up during the run is a
    /// clear error at the end, not a silently short report.
    package func checkWritten() throws {
        if let failure = source().failure { throw ReportListError(description: failure) }
    }

    package func makeIterator() -> Iterator {
        let (elements, descriptor, _) = source()
        if let elements { return Iterator(memory: elements) }
        // The list keeps the descriptor open while an iterator of it exists.
        return Iterator(reader: LineReader(descriptor: descriptor!, owner: self))
    }

    /// Reads entries one at a time: from memory, or a line at a time from the spool file.
    package struct Iterator: IteratorProtocol {
        private var memory: IndexingIterator<[Element]>?
        private let reader: LineReader?
        private let decoder = JSONDecoder()

        init(memory: [Element]) {
            self.memory = memory.makeIterator()
            self.reader = nil
        }

        init(reader: LineReader) {
            self.memory = nil
            self.reader = reader
        }

        package mutating func next() -> Element? {
            if memory != nil { return memory!.next() }
            guard let reader, let line = reader.nextLine() else { return nil }
            // The file holds only what `append` encoded; a line that does not decode means the
            // spool was damaged from outside, which ends the list rather than inventing entries.
            return try? decoder.decode(Element.self, from: line)
        }
    }
}

extension ReportList: Codable {
    package convenience init(from decoder: any Decoder) throws {
        self.init(try [Element](from: decoder))
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        for element in self { try container.encode(element) }
    }
}

package struct ReportListError: Error, CustomStringConvertible {
    package var description: String

    package init(description: String) {
        self.description = description
    }
}

/// Reads a file a line at a time through a fixed buffer, with `pread` from its own offset: the
/// descriptor's position (where appends go) is not moved, and several readers may read at once.
final class LineReader {
    private let descriptor: Int32
    /// Holds the descriptor's owner alive while reading.
    private let owner: AnyObject
    private var offset: off_t = 0
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false

    init(descriptor: Int32, owner: AnyObject) {
        self.descriptor = descriptor
        self.owner = owner
    }

    func nextLine() -> Data? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Data(buffer[start..<newline])
                start = newline + 1
                return line
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                let line = Data(buffer[start...])
                start = buffer.count
                return line
            }
            buffer.removeFirst(start)
            start = 0
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, $0.count, offset) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                atEnd = true
            } else {
                buffer.append(contentsOf: chunk[0..<count])
                offset += off_t(count)
            }
        }
    }
}

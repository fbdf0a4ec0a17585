import AppStoreServerModel
import Decisions
package import Foundation
import LedgerModel
import RunResults
import SignedData

/// `report.json`: the report's fields under their documented names (a contract), streamed.
extension RecoveryReport {
    package func json() throws -> Data {
        var data = Data()
        try writeJSON { data.append(contentsOf: Array($0.utf8)) }
        return data
    }

    /// `report.json`, written a piece at a time: the lists are read from their spools entry by
    /// entry, so a report of a million notifications never sits in memory whole. Keys sorted,
    /// indented, as `JSONEncoder` with `.prettyPrinted` and `.sortedKeys` writes them.
    package func writeJSON(_ write: (String) throws -> Void) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        // Each line break of the encoder's output gets `indent` after it (in the bytes: a JSON
        // string's own line breaks are escaped, and Foundation's replacingOccurrences cost a dry
        // run 2% of its CPU).
        func encoded(_ value: some Encodable, indent: String) throws -> String {
            let data = try encoder.encode(value)
            let indentBytes = Array(indent.utf8)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(data.count + data.count / 4)
            for byte in data {
                bytes.append(byte)
                if byte == UInt8(ascii: "\n") { bytes.append(contentsOf: indentBytes) }
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        func list<Element>(_ elements: ReportList<Element>) throws {
            var first = true
            for element in elements {
                try write((first ? "[\n    " : ",\n    ") + (try encoded(element, indent: "    ")))
                first = false
            }
            try write(first ? "[]" : "\n  ]")
        }
        // In the order of CodingKeys sorted by name.
        try write("{\n")
        // Only when asked for (`consumption-requests --answer`).
        if let answers { try write("  \"answers\" : " + (try encoded(answers, indent: "  ")) + ",\n") }
        // Only for `audit`.
        if let audit { try write("  \"audit\" : " + (try encoded(audit, indent: "  ")) + ",\n") }
        // Only for `compensate`.
        if let compensation { try write("  \"compensation\" : " + (try encoded(compensation, indent: "  ")) + ",\n") }
        try write("  \"counts\" : " + (try encoded(counts, indent: "  ")) + ",\n  \"customers\" : ")
        try list(customers)
        try write(",\n  \"deliveryFailures\" : " + (try encoded(deliveryFailures, indent: "  ")))
        // Only for an import: its fields, then its problems streamed.
        if let imported, let fields = importFields {
            var object = Substring(try encoded(fields, indent: "  "))
            object = object.dropLast()  // its closing brace: the problems follow the fields
            while object.last?.isWhitespace == true { object = object.dropLast() }
            try write(",\n  \"import\" : " + object + ",\n    \"problems\" : ")
            var first = true
            for problem in imported.problems {
                try write((first ? "[\n      " : ",\n      ") + (try encoded(problem, indent: "      ")))
                first = false
            }
            try write(first ? "[]\n  }" : "\n    ]\n  }")
        }
        try write(",\n  \"missed\" : ")
        try list(missed)
        // Only when asked for: report.json stays as it was for runs without --deliver-to.
        if let redelivery { try write(",\n  \"redelivery\" : " + (try encoded(redelivery, indent: "  "))) }
        try write(",\n  \"rejected\" : ")
        try list(rejected)
        try write(",\n  \"repairs\" : ")
        try list(repairs)
        try write(",\n  \"run\" : " + (try encoded(run, indent: "  ")))
        if let timeline { try write(",\n  \"timeline\" : " + (try encoded(timeline, indent: "  "))) }
        try write("\n}\n")
    }
}

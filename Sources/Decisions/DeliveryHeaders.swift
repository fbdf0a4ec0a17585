import Foundation

/// Headers sent with every POST to a delivery target: how a credential reaches the team's
/// handler without being in its URL (where logs, tables and process lists would show it).
///
/// Each is given as `Name: value`. In the value, `$NAME` or `${NAME}` is replaced by the
/// environment variable NAME, `${file:PATH}` by the file's content (without its final line
/// breaks), and `$$` is a `$`; quote the whole argument so that the shell leaves it alone:
/// `--forward-header 'Authorization: Bearer $HANDLER_TOKEN'`. A variable that is not set, a file
/// that cannot be read, or a value with a line break is a configuration error, whose message
/// names the variable or file, never the value. Values are shown nowhere (`description`).
package struct DeliveryHeaders: Hashable, Sendable, CustomStringConvertible {
    package struct Field: Hashable, Sendable {
        package var name: String
        package var value: String
    }

    package private(set) var fields: [Field] = []

    package init() {}

    /// These headers, then `other`'s.
    package func adding(_ other: DeliveryHeaders) -> DeliveryHeaders {
        var both = self
        both.fields += other.fields
        return both
    }

    /// The names only: the values are secrets.
    package var description: String { fields.isEmpty ? "none" : fields.map { "\($0.name): (hidden)" }.joined(separator: ", ") }

    /// Headers the HTTP client sets, or that would change what the handler is sent.
    static let reserved: Set<String> = ["host", "content-type", "content-length", "transfer-encoding", "connection", "expect", "upgrade", "te", "trailer"]

    /// Parses `specs` (`Name: value` each), reading what their values refer to.
    package static func parse(
        _ specs: [String], environment: [String: String], readFile: (String) throws -> String
    ) throws(DeliveryHeaderError) -> DeliveryHeaders {
        var headers = DeliveryHeaders()
        for spec in specs {
            guard let colon = spec.firstIndex(of: ":") else {
                throw DeliveryHeaderError(description: "expects 'Name: value', such as 'Authorization: Bearer $HANDLER_TOKEN'")
            }
            let name = spec[..<colon].trimmingCharacters(in: .whitespaces)
            let token = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
            guard !name.isEmpty, name.unicodeScalars.allSatisfy(token.contains) else {
                throw DeliveryHeaderError(description: "'\(name.prefix(40))' is not a header name")
            }
            guard !reserved.contains(name.lowercased()) else {
                throw DeliveryHeaderError(description: "\(name) is set by the tool and cannot be given")
            }
            let value = try expand(String(spec[spec.index(after: colon)...]).trimmingCharacters(in: .whitespaces), environment: environment, readFile: readFile)
            // By scalar: "\r\n" is one Character, equal to neither "\r" nor "\n".
            guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw DeliveryHeaderError(description: "the value of \(name) holds a line break or NUL once read")
            }
            headers.fields.append(Field(name: name, value: value))
        }
        return headers
    }

    /// `value` with its references replaced.
    static func expand(_ value: String, environment: [String: String], readFile: (String) throws -> String) throws(DeliveryHeaderError) -> String {
        var out = ""
        var rest = Substring(value)
        while let dollar = rest.firstIndex(of: "$") {
            out += rest[..<dollar]
            rest = rest[rest.index(after: dollar)...]
            if rest.first == "$" {
                out += "$"
                rest = rest.dropFirst()
            } else if rest.first == "{" {
                guard let close = rest.firstIndex(of: "}") else { throw DeliveryHeaderError(description: "a '${' has no closing '}'") }
                let reference = rest[rest.index(after: rest.startIndex)..<close]
                rest = rest[rest.index(after: close)...]
                if reference.hasPrefix("file:") {
                    let path = String(reference.dropFirst("file:".count))
                    let content: String
                    do { content = try readFile(path) } catch {
                        throw DeliveryHeaderError(description: "cannot read the file \(path) a header refers to")
                    }
                    var trimmed = Substring(content)
                    while let last = trimmed.last, last == "\n" || last == "\r" || last == "\r\n" { trimmed = trimmed.dropLast() }
                    out += trimmed
                } else {
                    out += try variable(String(reference), environment)
                }
            } else {
                let name = rest.prefix { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
                guard !name.isEmpty else { throw DeliveryHeaderError(description: "a '$' is not followed by a variable name (write $$ for a $)") }
                rest = rest.dropFirst(name.count)
                out += try variable(String(name), environment)
            }
        }
        return out + rest
    }

    private static func variable(_ name: String, _ environment: [String: String]) throws(DeliveryHeaderError) -> String {
        guard let value = environment[name], !value.isEmpty else {
            throw DeliveryHeaderError(description: "refers to the environment variable \(name), which is not set")
        }
        return value
    }
}

/// What is wrong with a delivery header; the command that took it names its option in front.
package struct DeliveryHeaderError: Error, CustomStringConvertible, Sendable, Hashable {
    package var description: String
}

/// Splits a SQL script into its statements. PostgreSQL's extended protocol, which PostgresNIO
/// speaks, takes one statement at a time, while a migration file (also meant for `psql -f`)
/// holds many. Semicolons inside quotes, quoted identifiers, dollar-quoted bodies and comments
/// do not end a statement.
package enum SQLScript {
    package static func statements(in script: String) -> [String] {
        let characters = Array(script.unicodeScalars)
        var statements: [String] = []
        var current = String.UnicodeScalarView()
        var index = 0
        var hasContent = false

        func flush() {
            let text = String(current).trimmingWhitespace()
            if hasContent && !text.isEmpty { statements.append(text) }
            current = String.UnicodeScalarView()
            hasContent = false
        }

        while index < characters.count {
            let character = characters[index]
            let next: Unicode.Scalar? = index + 1 < characters.count ? characters[index + 1] : nil
            switch character {
            case "-" where next == "-":
                // Line comment: dropped.
                while index < characters.count && characters[index] != "\n" { index += 1 }
                continue
            case "/" where next == "*":
                // Block comment (they nest in PostgreSQL): dropped.
                var depth = 0
                repeat {
                    if characters[index] == "/" && index + 1 < characters.count && characters[index + 1] == "*" {
                        depth += 1
                        index += 2
                    } else if characters[index] == "*" && index + 1 < characters.count && characters[index + 1] == "/" {
                        depth -= 1
                        index += 2
                    } else {
                        index += 1
                    }
                } while depth > 0 && index < characters.count
                current.append(" ")
                continue
            case "'", "\"":
                let end = closing(character, in: characters, from: index)
                current.append(contentsOf: characters[index..<end])
                hasContent = true
                index = end
                continue
            case "$":
                if let tagEnd = dollarTagEnd(in: characters, from: index) {
                    let tag = Array(characters[index...tagEnd])
                    var search = tagEnd + 1
                    while search < characters.count && !characters[search...].starts(with: tag) { search += 1 }
                    let end = min(characters.count, search + tag.count)
                    current.append(contentsOf: characters[index..<end])
                    hasContent = true
                    index = end
                    continue
                }
            case ";":
                flush()
                index += 1
                continue
            default:
                break
            }
            current.append(character)
            if !character.properties.isWhitespace { hasContent = true }
            index += 1
        }
        flush()
        return statements
    }

    /// The index just past a quoted string or identifier starting at `start`; a doubled quote
    /// character inside is an escaped one.
    private static func closing(_ quote: Unicode.Scalar, in characters: [Unicode.Scalar], from start: Int) -> Int {
        var index = start + 1
        while index < characters.count {
            if characters[index] == quote {
                if index + 1 < characters.count && characters[index + 1] == quote {
                    index += 2
                    continue
                }
                return index + 1
            }
            index += 1
        }
        return characters.count
    }

    /// When a dollar-quote tag (`$$` or `$tag$`) starts at `start`, the index of its closing `$`.
    private static func dollarTagEnd(in characters: [Unicode.Scalar], from start: Int) -> Int? {
        if start > 0 {
            let previous = characters[start - 1]
            // `$1` parameters and identifiers containing `$` are not quotes.
            if previous.properties.isAlphabetic || ("0"..."9").contains(previous) || previous == "_" { return nil }
        }
        var index = start + 1
        while index < characters.count {
            let character = characters[index]
            if character == "$" { return index }
            let allowed = character.properties.isAlphabetic || character == "_"
                || (index > start + 1 && ("0"..."9").contains(character))
            if !allowed { return nil }
            index += 1
        }
        return nil
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}

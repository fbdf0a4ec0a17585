import AppReceipt

/// What an `import` reads: one value a line, of one kind for the whole input.
package enum ImportKind: String, Sendable, Codable, CaseIterable {
    /// Any transaction ID of an account (an original one or not).
    case transactionIds = "transaction-ids"
    /// Base64 app receipts as apps stored them for verifyReceipt.
    case receipts
    /// Order IDs from Apple's emailed receipts (Look Up Order ID: Production only).
    case orderIds = "order-ids"

    /// The command-line flag that names it.
    package var flag: String { "--\(rawValue)" }
}

/// One line of an import's input, read: nothing to do, the IDs to ask Apple with, an order to
/// look up, or why it cannot be used. Pure: no I/O.
package enum ImportLine: Sendable, Equatable {
    /// Blank, or a `#` comment.
    case skip
    /// Transaction IDs of one account, the first to ask with (a receipt's original ones first).
    case transactionIds([String])
    /// An order ID to look up.
    case orderId(String)
    /// Not usable: why (naming nothing secret; the line number is the reader's).
    case garbled(String)

    /// Longer lines are garbled: a receipt of every purchase a customer ever made is far shorter.
    package static let maximumLength = 1 << 20

    package static func parse(_ text: Substring, kind: ImportKind) -> ImportLine {
        let value = text.trimmingWhitespace
        if value.isEmpty || value.hasPrefix("#") { return .skip }
        switch kind {
        case .transactionIds:
            guard AccountRepairMachine.isWellFormedTransactionId(String(value)) else {
                return .garbled("not a transaction ID (Apple's are up to 32 digits)")
            }
            return .transactionIds([String(value)])
        case .receipts:
            do {
                let ids = try AppReceipt(base64: value).transactionIds.filter(AccountRepairMachine.isWellFormedTransactionId)
                guard !ids.isEmpty else { return .garbled("a receipt without an in-app purchase") }
                return .transactionIds(ids)
            } catch {
                return .garbled("\(error)")
            }
        case .orderIds:
            guard value.utf8.count <= 64, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                return .garbled("not an order ID (letters and digits, as on Apple's emailed receipt)")
            }
            return .orderId(String(value))
        }
    }

    /// What a report may show of a line: a short prefix, never a whole receipt.
    package static func excerpt(_ text: Substring) -> String {
        let value = text.trimmingWhitespace
        return value.count > 24 ? String(value.prefix(20)) + "…" : String(value)
    }
}

extension Substring {
    var trimmingWhitespace: Substring {
        var value = self
        // A byte-order mark (a file saved by a spreadsheet) counts as whitespace.
        while let first = value.first, first.isWhitespace || first == "\u{FEFF}" { value.removeFirst() }
        while let last = value.last, last.isWhitespace { value.removeLast() }
        return value
    }
}

import AppReceipt
package import SignedData

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
    /// Transaction IDs of one account, the first to ask with (a receipt's original ones first),
    /// and where to ask (`ImportRoute`).
    case transactionIds([String], ImportRoute)
    /// An order ID to look up.
    case orderId(String)
    /// Not usable: why (naming nothing secret; the line number is the reader's).
    case garbled(String)

    /// Longer lines are garbled: a receipt of every purchase a customer ever made is far shorter.
    package static let maximumLength = 1 << 20

    /// - Parameter pair: the app and environment the import runs for; `sandboxPair` whether the
    ///   app's Sandbox environment is configured beside it.
    package static func parse(_ text: Substring, kind: ImportKind, pair: AppStorePair, sandboxPair: Bool = false) -> ImportLine {
        let value = text.trimmingWhitespace
        if value.isEmpty || value.hasPrefix("#") { return .skip }
        switch kind {
        case .transactionIds:
            guard AccountRepairMachine.isWellFormedTransactionId(String(value)) else {
                return .garbled("not a transaction ID (Apple's are up to 32 digits)")
            }
            return .transactionIds([String(value)], .thisPair(orSandbox: sandboxPair))
        case .receipts:
            do {
                let receipt = try AppReceipt(base64: value)
                if let bundleId = receipt.bundleId, bundleId != pair.bundleId {
                    return .garbled("a receipt of another app (\(bundleId.prefix(100))), not \(pair.bundleId)")
                }
                let route: ImportRoute
                switch ImportRoute.forReceipt(type: receipt.receiptType, pair: pair, sandboxPair: sandboxPair) {
                case .success(let found): route = found
                case .failure(let refusal): return .garbled(refusal.reason)
                }
                let ids = receipt.transactionIds.filter(AccountRepairMachine.isWellFormedTransactionId)
                guard !ids.isEmpty else { return .garbled("a receipt without an in-app purchase") }
                return .transactionIds(ids, route)
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

/// Where an import asks Apple about a line's IDs. Apple's TransactionIdNotFoundError page: make
/// the request "in the same environment, production or sandbox, that generated the transaction
/// ID"; when that is unknown, Apple's advice is production first, then sandbox (App Store Server
/// API overview; Apple staff, developer forum thread 763025). A production app's table holds App
/// Review and TestFlight purchases, which are Sandbox purchases. Pure: no I/O.
package enum ImportRoute: Sendable, Equatable {
    /// The import's own pair; `orSandbox`: the app's Sandbox pair when this one does not know the
    /// ID. A ProductionSandbox receipt read in Production goes so too, costing one request to
    /// Production first (its type is not a field Apple documents, so it is not trusted to skip it).
    case thisPair(orSandbox: Bool)

    /// Why a receipt is not asked about anywhere.
    package struct Refusal: Error, Equatable {
        package var reason: String
    }

    /// A receipt's type decides: Production receipts belong to Production, ProductionSandbox (and
    /// the VPP variants) to Sandbox, Xcode's to no server of Apple's (StoreKit testing in Xcode);
    /// a receipt without a type is asked about where the import runs.
    package static func forReceipt(type: String?, pair: AppStorePair, sandboxPair: Bool) -> Result<ImportRoute, Refusal> {
        guard let type else { return .success(.thisPair(orSandbox: sandboxPair)) }
        if type == "Xcode" {
            return .failure(Refusal(reason: "an Xcode receipt (StoreKit testing in Xcode): Apple's servers do not know its IDs"))
        }
        let sandbox = type.hasSuffix("Sandbox")
        guard sandbox || type.hasPrefix("Production") else {
            return .failure(Refusal(reason: "a receipt of type \(type.prefix(40)), not Production, ProductionSandbox or Xcode"))
        }
        switch (pair.environment, sandbox) {
        case (.sandbox, true), (.production, false): return .success(.thisPair(orSandbox: pair.environment == .production && sandboxPair))
        case (.production, true):
            guard sandboxPair else {
                return .failure(Refusal(reason: "a Sandbox receipt (\(type)): configure the app's Sandbox environment to import it"))
            }
            return .success(.thisPair(orSandbox: true))
        default:
            return .failure(Refusal(reason: "a Production receipt: import it with --environment Production"))
        }
    }

    /// After this pair's refusal: whether the app's Sandbox pair is asked. Apple documents
    /// 4040010 (TransactionIdNotFound); Production has answered 4000006 (InvalidTransactionId)
    /// for a Sandbox ID (apple/app-store-server-library-node#129), and a well-formed ID is only
    /// sent, so that answer is tried in Sandbox too. Reading from Sandbox changes nothing.
    package func asksSandbox(afterAnswer answer: String?) -> Bool {
        guard case .thisPair(orSandbox: true) = self else { return false }
        return answer == "4040010" || answer == "4000006"
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

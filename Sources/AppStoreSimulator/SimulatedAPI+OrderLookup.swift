import Crypto
import Foundation
import SignedData
import Synchronization

/// Look Up Order ID (`GET /inApps/v1/lookup/{orderId}`, Production only): the order ID on Apple's
/// emailed receipt answers with the purchases of that order, signed now (`status` 0), or says the
/// order is not this app's (`status` 1, no array). An order can hold several transactions (Apple
/// answers `signedTransactions`, an array): the first purchase of each of an account's products
/// is one order here, as if bought in one checkout, each with its own originalTransactionId;
/// every renewal is an order of its own.
extension SimulatedAPI {
    /// The order ID Apple's emailed receipt shows for a transaction: ten characters, derived from
    /// the app and the order's first transaction (the account's first purchase, for the first
    /// purchase of any of its products).
    package func orderId(ofTransaction transactionId: String) -> String {
        if let customer = scenario.customer(forTransactionId: transactionId), customer.purchases.contains(where: { $0.originalTransactionId == transactionId }) {
            return Self.orderId(bundleId: scenario.configuration.bundleId, transactionId: customer.originalTransactionId)
        }
        return Self.orderId(bundleId: scenario.configuration.bundleId, transactionId: transactionId)
    }

    static let orderAlphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")

    static func orderId(bundleId: String, transactionId: String) -> String {
        let digest = Array(SHA256.hash(data: Array("\(bundleId)|\(transactionId)".utf8)))
        return String(digest.prefix(10).map { orderAlphabet[Int($0) % orderAlphabet.count] })
    }

    func lookUpOrder(_ orderId: String, now: Date) -> Answer {
        guard !orderId.isEmpty, orderId.count <= 64, orderId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            return .error(400, 4_000_000, "Bad request.")
        }
        let index = orders.withLock { index -> [String: [String]] in
            if let index { return index }
            var built: [String: [String]] = [:]
            for customer in scenario.customers {
                var seen: Set<String> = []
                for version in customer.transactionVersions {
                    guard let id = version.transaction.transactionId, seen.insert(id).inserted else { continue }
                    built[self.orderId(ofTransaction: id), default: []].append(id)
                }
            }
            index = built
            return built
        }
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        var signed: [String] = []
        for transactionId in index[orderId] ?? [] {
            guard let customer = scenario.customer(forTransactionId: transactionId),
                let version = customer.transactionVersions.last(where: { $0.transaction.transactionId == transactionId && $0.modified <= nowMs })
            else { continue }
            var transaction = version.transaction
            transaction.signedDate = nowMs
            guard let one = try? signer.sign(transaction) else { return .error(500, 5_000_000, "An unknown error occurred.") }
            signed.append(one)
        }
        guard !signed.isEmpty else { return .json(OrderLookupBody(status: 1, signedTransactions: nil)) }
        return .json(OrderLookupBody(status: 0, signedTransactions: signed))
    }

    struct OrderLookupBody: Encodable {
        var status: Int
        var signedTransactions: [String]?
    }
}

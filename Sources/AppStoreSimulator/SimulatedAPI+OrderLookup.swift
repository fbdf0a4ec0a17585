import Crypto
import Foundation
import SignedData
import Synchronization

/// Look Up Order ID (`GET /inApps/v1/lookup/{orderId}`, Production only): the order ID on Apple's
/// emailed receipt answers with the purchases of that order, signed now (`status` 0), or says the
/// order is not this app's (`status` 1, no array).
extension SimulatedAPI {
    /// The order ID Apple's emailed receipt shows for a transaction (each purchase and each
    /// renewal is an order of its own): ten characters, derived from the app and the transaction.
    package func orderId(ofTransaction transactionId: String) -> String {
        Self.orderId(bundleId: scenario.configuration.bundleId, transactionId: transactionId)
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
        let index = orders.withLock { index -> [String: String] in
            if let index { return index }
            var built: [String: String] = [:]
            for customer in scenario.customers {
                for version in customer.transactionVersions {
                    guard let id = version.transaction.transactionId else { continue }
                    built[self.orderId(ofTransaction: id)] = id
                }
            }
            index = built
            return built
        }
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        guard let transactionId = index[orderId], let customer = scenario.customer(forTransactionId: transactionId),
            let version = customer.transactionVersions.last(where: { $0.transaction.transactionId == transactionId && $0.modified <= nowMs })
        else { return .json(OrderLookupBody(status: 1, signedTransactions: nil)) }
        var transaction = version.transaction
        transaction.signedDate = nowMs
        guard let signed = try? signer.sign(transaction) else { return .error(500, 5_000_000, "An unknown error occurred.") }
        return .json(OrderLookupBody(status: 0, signedTransactions: [signed]))
    }

    struct OrderLookupBody: Encodable {
        var status: Int
        var signedTransactions: [String]?
    }
}

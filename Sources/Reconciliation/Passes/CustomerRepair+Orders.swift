import AppStoreServerAPI
import SignedData

extension CustomerRepair {
    /// Look Up Order ID, for `import --order-ids` and `customer --order-id`: the transaction IDs of
    /// the order's purchases, each verified first (originalTransactionId before transactionId);
    /// empty when Apple answers the order is not this app's (status 1). A purchase that does not
    /// verify is `OrderNotVerified`: nothing of it is used.
    package func orderTransactionIds(_ orderId: String) async throws -> [String] {
        let answer = try await client.lookUpOrderId(orderId)
        guard answer.isValid else { return [] }
        var ids: [String] = []
        for signed in answer.signedTransactions ?? [] {
            switch await verifier.verifyTransaction(signed) {
            case .verified(let transaction):
                ids += [transaction.originalTransactionId, transaction.transactionId].compactMap { $0 }
            case .rejected(let rejection):
                throw OrderNotVerified(description: "the order's purchase failed verification (\(rejection.reason.rawValue))")
            case .retryLater(let reason):
                throw OrderNotVerified(description: "the order's purchase could not be verified now (\(reason))")
            }
        }
        guard !ids.isEmpty else { throw OrderNotVerified(description: "Apple's answer names no purchase of the order") }
        return ids
    }
}

/// Apple's answer to Look Up Order ID did not verify, or named no purchase.
package struct OrderNotVerified: Error, CustomStringConvertible, Sendable {
    package var description: String
}

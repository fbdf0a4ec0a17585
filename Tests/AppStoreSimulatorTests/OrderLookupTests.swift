import AppReceipt
import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import SignedData
import Testing

/// Look Up Order ID as Apple documents it: Production only, `status` 0 with the order's signed
/// purchases, 1 for an order that is not the app's; and the receipts the simulated devices hold.
@Suite struct OrderLookupTests {
    func api(_ environment: AppStoreEnvironment) throws -> SimulatedAPI {
        var configuration = Scenario.Configuration()
        configuration.seed = 11
        configuration.customers = 20
        configuration.environment = environment
        return try SimulatedAPI(scenario: Scenario(configuration))
    }

    func bearer(_ api: SimulatedAPI) throws -> String {
        let credentials = APICredentials(
            issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: api.scenario.configuration.bundleId,
            signingKey: api.credentials.privateKey
        )
        return "Bearer " + (try BearerTokenIssuer(credentials: credentials).token(now: Date()))
    }

    func lookUp(_ orderId: String, _ api: SimulatedAPI) throws -> SimulatedAPI.Answer {
        api.handle(method: "GET", path: "/inApps/v1/lookup/\(orderId)", query: [], authorization: try bearer(api), body: [])
    }

    @Test func anOrderOfTheAppAnswersWithItsPurchaseSignedNow() async throws {
        let api = try api(.production)
        let originals = Set(api.scenario.customers.flatMap { $0.purchases.map(\.originalTransactionId) })
        let customer = try #require(api.scenario.customers.first { $0.transactionVersions.contains { !originals.contains($0.transaction.transactionId ?? "") } })
        let renewal = try #require(customer.transactionVersions.last { !originals.contains($0.transaction.transactionId ?? "") }?.transaction.transactionId)
        let answer = try lookUp(api.orderId(ofTransaction: renewal), api)
        #expect(answer.status == 200)
        let body = try JSONDecoder().decode(OrderLookupResponse.self, from: Data(answer.body))
        #expect(body.status == 0)
        let signed = try #require(body.signedTransactions?.first)
        let verifier = try SignedDataVerifier(api.verifierConfiguration)
        guard case .verified(let transaction) = await verifier.verifyTransaction(signed) else {
            Issue.record("the order's purchase does not verify")
            return
        }
        #expect(transaction.transactionId == renewal)
        #expect(transaction.originalTransactionId == customer.transactionVersions.last?.transaction.originalTransactionId)
    }

    /// Apple's answer is an array: an order can hold several purchases. An account's first
    /// purchase of each of its products is one order here, each with its own originalTransactionId.
    @Test func anOrderOfSeveralPurchasesAnswersWithEachSigned() async throws {
        let api = try api(.production)
        let customer = try #require(api.scenario.customers.first { $0.purchases.count > 1 })
        let order = api.orderId(ofTransaction: customer.purchases[1].originalTransactionId)
        #expect(order == api.orderId(ofTransaction: customer.originalTransactionId), "one checkout")
        let body = try JSONDecoder().decode(OrderLookupResponse.self, from: Data(try lookUp(order, api).body))
        let verifier = try SignedDataVerifier(api.verifierConfiguration)
        var found: [String] = []
        for signed in body.signedTransactions ?? [] {
            guard case .verified(let transaction) = await verifier.verifyTransaction(signed) else {
                Issue.record("a purchase of the order does not verify")
                return
            }
            found.append(transaction.transactionId ?? "")
        }
        #expect(Set(found) == Set(customer.purchases.map(\.originalTransactionId)), "every product's first purchase, once each")
        #expect(found.count == customer.purchases.count)
    }

    @Test func anOrderThatIsNotTheAppsIsStatusOneWithoutPurchases() throws {
        let api = try api(.production)
        let answer = try lookUp("ZZZZZZZZZZ", api)
        #expect(answer.status == 200)
        let body = try JSONDecoder().decode(OrderLookupResponse.self, from: Data(answer.body))
        #expect(body.status == 1 && body.signedTransactions == nil)
        #expect(try lookUp("not%20an%20order", api).status == 400)
    }

    @Test func sandboxHasNoLookUpOrderId() throws {
        let api = try api(.sandbox)
        let renewal = try #require(api.scenario.customers.first?.transactionVersions.first?.transaction.transactionId)
        #expect(try lookUp(api.orderId(ofTransaction: renewal), api).status == 404)
    }

    @Test func aDevicesReceiptNamesEveryTransactionOfTheAccount() throws {
        let api = try api(.production)
        let customer = try #require(api.scenario.customers.first { $0.purchases.count > 1 })
        let receipt = try AppReceipt(base64: try api.appReceipt(customer: customer.index, indefiniteLengths: true))
        #expect(receipt.bundleId == api.scenario.configuration.bundleId)
        let now = Int64(api.scenario.configuration.now.timeIntervalSince1970 * 1000)
        let expected = Set(customer.transactionVersions.filter { $0.modified <= now }.compactMap(\.transaction.transactionId))
        #expect(Set(receipt.purchases.compactMap(\.transactionId)) == expected)
        #expect(Set(receipt.purchases.compactMap(\.originalTransactionId)) == Set(customer.purchases.map(\.originalTransactionId)))
    }
}

import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import SignedData
import Testing

/// A refund request's life in the simulator, called directly with explicit times: Apple asks
/// again every 8 hours while the request is unanswered, stops once an answer arrives, and
/// declines the refund after an answer that prefers DECLINE.
@Suite struct RefundRequestFlowTests {
    @Test func repeatsStopOnceAnAnswerArrivesAndADeclineIsDecided() throws {
        let now = Date()
        var configuration = Scenario.Configuration()
        configuration.seed = 7
        configuration.customers = 30
        configuration.now = now
        let api = try SimulatedAPI(scenario: Scenario(configuration))
        let candidates = api.scenario.customers.compactMap { customer in
            customer.purchases.first { $0.latestTransaction.inAppOwnershipType != "FAMILY_SHARED" }?.latestTransaction.transactionId
        }
        let transaction = try #require(candidates.first)
        let asked = now.addingTimeInterval(-40 * 3600)
        let requests = try api.requestRefund(transactionId: transaction, at: asked, repeats: 4)
        #expect(requests.map(\.signedDate) == (0...4).map { Int64(asked.timeIntervalSince1970 * 1000) + Int64($0) * 8 * 3_600_000 })
        let credentials = APICredentials(
            issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: configuration.bundleId, signingKey: api.credentials.privateKey
        )
        func bearer(_ time: Date) throws -> String { "Bearer " + (try BearerTokenIssuer(credentials: credentials).token(now: time)) }
        func history(at time: Date) throws -> [NotificationPayload] {
            let body = #"{"startDate":\#(Int64(asked.timeIntervalSince1970 * 1000) - 1000),"endDate":\#(Int64(now.timeIntervalSince1970 * 1000)),"transactionId":"\#(transaction)"}"#
            let answer = api.handle(method: "POST", path: "/inApps/v1/notifications/history", query: [], authorization: try bearer(time), body: Array(body.utf8), now: time)
            let page = try JSONDecoder().decode(NotificationHistoryResponse.self, from: Data(answer.body))
            return try page.notificationHistory.map { item in
                let bytes = try #require(Base64URL.decode(Substring(item.signedPayload.split(separator: ".")[1])))
                return try JSONDecoder().decode(NotificationPayload.self, from: Data(bytes))
            }
        }
        let unanswered = try history(at: now).filter { $0.notificationType == .consumptionRequest }
        #expect(unanswered.count == 5, "five requests while unanswered")
        // The team answers 17 hours after the first request (after the third), preferring DECLINE.
        let answeredAt = asked.addingTimeInterval(17 * 3600)
        let body = #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false,"refundPreference":"DECLINE"}"#
        let put = api.handle(
            method: "PUT", path: "/inApps/v2/transactions/consumption/\(transaction)", query: [], authorization: try bearer(answeredAt), body: Array(body.utf8),
            now: answeredAt
        )
        #expect(put.status == 202)
        let after = try history(at: now.addingTimeInterval(1))
        #expect(after.filter { $0.notificationType == .consumptionRequest }.count == 3, "the requests signed before the answer; none after it")
        let declined = after.filter { $0.notificationType == .refundDeclined }
        #expect(declined.count == 1 && declined.first?.signedDate == Int64(answeredAt.timeIntervalSince1970 * 1000) + 1, "Apple declined right after the answer")
    }
}

/// Apple's rules for an ASSIGNED (multiseat) subscription, as the simulator applies them: no
/// renewal-date extension (AssignedSubscriptionExtensionIneligibleError, 4030028) and no
/// consumption answer (InvalidAssignedTransactionNotSupportedError, 4000227).
@Suite struct AssignedSubscriptionTests {
    @Test func anAssignedSubscriptionIsNeitherExtendedNorAnsweredAbout() throws {
        let now = Date()
        var configuration = Scenario.Configuration()
        configuration.seed = 9
        configuration.customers = 30
        configuration.now = now
        configuration.assignedCustomers = Set(0..<30)
        let api = try SimulatedAPI(scenario: Scenario(configuration))
        let credentials = APICredentials(
            issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: configuration.bundleId, signingKey: api.credentials.privateKey
        )
        let bearer = "Bearer " + (try BearerTokenIssuer(credentials: credentials).token(now: now))
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        let active = try #require(api.scenario.customers.first {
            $0.subscriptionStatus == .active && ($0.latestTransaction.expiresDate ?? 0) > nowMs && $0.latestTransaction.offerDiscountType == nil
        })
        #expect(active.latestTransaction.inAppOwnershipType == "ASSIGNED")
        let extend = #"{"extendByDays":3,"extendReasonCode":3,"requestIdentifier":"\#(UUID().uuidString.lowercased())"}"#
        let refused = api.handle(
            method: "PUT", path: "/inApps/v1/subscriptions/extend/\(active.originalTransactionId)", query: [], authorization: bearer, body: Array(extend.utf8), now: now)
        #expect(refused.status == 403 && String(decoding: refused.body, as: UTF8.self).contains("4030028"), "\(String(decoding: refused.body, as: UTF8.self))")
        let answer = #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":false}"#
        let transaction = try #require(active.latestTransaction.transactionId)
        let notTaken = api.handle(
            method: "PUT", path: "/inApps/v2/transactions/consumption/\(transaction)", query: [], authorization: bearer, body: Array(answer.utf8), now: now)
        #expect(notTaken.status == 400 && String(decoding: notTaken.body, as: UTF8.self).contains("4000227"), "\(String(decoding: notTaken.body, as: UTF8.self))")
        #expect(api.renewalExtensions.isEmpty && api.consumptionAnswers.isEmpty)
    }
}

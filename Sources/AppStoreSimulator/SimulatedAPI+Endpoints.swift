import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Crypto
import Foundation
import SignedData
import Synchronization

extension SimulatedAPI {
    static let pageSize = 20

    struct HistoryBody: Codable, Hashable {
        var startDate: Int64?
        var endDate: Int64?
        var notificationType: String?
        var notificationSubtype: String?
        var transactionId: String?
        var originalTransactionId: String?
        var onlyFailures: Bool?
    }

    /// A pagination token: where the next page starts, for which body, issued when.
    struct PageToken: Codable {
        var offset: Int
        var body: String
        var issued: Int64
    }

    // MARK: Get Notification History

    func notificationHistory(query: [(String, String)], body: [UInt8], now: Date) -> Answer {
        guard let request = try? JSONDecoder().decode(HistoryBody.self, from: Data(body)) else {
            return .error(400, 4_000_000, "Invalid request.")
        }
        let ahead: Int64 = state.withLock { state -> Int64 in
            defer { state.historyRequests += 1 }
            return Int64(Self.clockAhead(afterHistoryRequests: state.historyRequests, options) * 1000)
        }
        let nowMs = Int64(now.timeIntervalSince1970 * 1000) + ahead
        let filter: HistoryFilter
        switch historyFilter(request, nowMs: nowMs) {
        case .checked(let value): filter = value
        case .refused(let answer): return answer
        }
        // The token is bound to the exact request body and expires.
        let bodyKey = Self.bodyKey(request)
        let offset: Int
        switch pageOffset(token: query.first(where: { $0.0 == "paginationToken" })?.1, bodyKey: bodyKey, nowMs: nowMs) {
        case .checked(let value): offset = value
        case .refused(let answer): return answer
        }
        let retried = state.withLock { $0.retriedDeliveries }
        let matches = historyMatches(filter, bodyKey: bodyKey, offset: offset, retried: retried, nowMs: nowMs)
        if filter.onlyFailures, let page = options.retriesDeliveredAtPage, offset == page * Self.pageSize {
            state.withLock { state in
                guard !state.retriesDeliveredServed else { return }
                state.retriesDeliveredServed = true
                for index in matches.prefix(options.retriesDelivered) { state.retriedDeliveries[index] = nowMs }
            }
        }
        let pageEnd = min(matches.count, offset + Self.pageSize)
        let later = state.withLock { $0.signedLater }
        let page: [NotificationHistoryItemBody] = (offset < pageEnd ? Array(matches[offset..<pageEnd]) : []).map { index in
            let notification = index < scenario.notifications.count ? scenario.notifications[index] : later[index - scenario.notifications.count]
            return NotificationHistoryItemBody(
                signedPayload: servedPayload(notification),
                sendAttempts: notification.sendAttempts.filter { $0.date <= nowMs }.map { .init(attemptDate: $0.date, sendAttemptResult: $0.result) }
                    + (retried[index].map { [.init(attemptDate: $0, sendAttemptResult: "SUCCESS")] } ?? [])
            )
        }
        let hasMore = pageEnd < matches.count
        var token: String?
        if hasMore {
            let next = PageToken(offset: offset + page.count, body: bodyKey, issued: nowMs)
            token = Base64URL.encode((try? JSONEncoder().encode(next)) ?? Data())
            if let broken = options.hasMoreWithoutTokenAtPage, offset == broken * Self.pageSize,
                state.withLock({ state in defer { state.tokenlessPageServed = true }; return !state.tokenlessPageServed })
            {
                token = nil
            }
        }
        return .json(NotificationHistoryResponseBody(notificationHistory: page, hasMore: hasMore, paginationToken: token).jsonText)
    }

    struct NotificationHistoryItemBody: Encodable {
        struct Attempt: Encodable { var attemptDate: Int64; var sendAttemptResult: String }
        var signedPayload: String
        var sendAttempts: [Attempt]
    }

    struct NotificationHistoryResponseBody: Encodable {
        var notificationHistory: [NotificationHistoryItemBody]
        var hasMore: Bool
        var paginationToken: String?

        /// What `JSONEncoder` with `.sortedKeys` writes, written by hand (see `JSONText`).
        var jsonText: JSONText {
            var json = JSONText(capacity: notificationHistory.reduce(256) { $0 + $1.signedPayload.utf8.count + 128 })
            json.raw("{")
            json.key("hasMore")
            json.bool(hasMore)
            json.raw(",")
            json.key("notificationHistory")
            json.array(notificationHistory) { json, item in
                json.raw("{")
                json.key("sendAttempts")
                json.array(item.sendAttempts) { json, attempt in
                    json.raw("{")
                    json.key("attemptDate")
                    json.int(attempt.attemptDate)
                    json.raw(",")
                    json.key("sendAttemptResult")
                    json.string(attempt.sendAttemptResult)
                    json.raw("}")
                }
                json.raw(",")
                json.key("signedPayload")
                json.string(item.signedPayload)
                json.raw("}")
            }
            if let paginationToken {
                json.raw(",")
                json.key("paginationToken")
                json.string(paginationToken)
            }
            json.raw("}")
            return json
        }
    }

    /// The same JWS with one character of its signature changed.
    static func tampered(_ jws: String) -> String {
        var characters = Array(jws)
        guard let last = characters.indices.last else { return jws }
        characters[last - 5] = characters[last - 5] == "A" ? "B" : "A"
        return String(characters)
    }

    static func bodyKey(_ body: HistoryBody) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = (try? encoder.encode(body)) ?? Data()
        return SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    /// What the history serves for a notification: as Apple signed it, or a bad payload.
    func servedPayload(_ notification: Scenario.Notification) -> String {
        if options.tamperedNotifications.contains(notification.uuid) { return Self.tampered((try? signNotification(notification)) ?? "") }
        guard let bad = options.badPayloads[notification.uuid] else { return (try? signNotification(notification)) ?? "" }
        return (try? badlySigned(notification, bad)) ?? ""
    }

    package func badlySigned(_ notification: Scenario.Notification, _ bad: BadPayload) throws -> String {
        let configuration = scenario.configuration
        var signer = self.signer
        var bundleId = configuration.bundleId
        var appAppleId: Int64? = configuration.environment == .production ? configuration.appAppleId : nil
        var environment = configuration.environment
        var type = notification.type
        var subtype = notification.subtype
        let signedAt = Date(timeIntervalSince1970: Double(notification.signedDate) / 1000)
        switch bad {
        case .tampered:
            return Self.tampered(try signNotification(notification))
        case .untrustedRoot:
            signer = try TestPKI(TestPKI.Options(referenceTime: configuration.now)).signer()
        case .leafWithoutAppleMarker:
            signer = try pki.signer(leafValidity: signedAt.addingTimeInterval(-86_400)...signedAt.addingTimeInterval(86_400), leafHasAppleMarker: false)
        case .leafExpiredAtSignedDate:
            signer = try pki.signer(leafValidity: signedAt.addingTimeInterval(-3 * 86_400)...signedAt.addingTimeInterval(-86_400), leafHasAppleMarker: true)
        case .wrongBundle:
            bundleId = "com.example.someone-else"
        case .wrongApp:
            appAppleId = (appAppleId ?? 0) + 1
        case .wrongEnvironment:
            environment = environment == .production ? .sandbox : .production
        case .malformedJSON:
            return try signer.sign(json: Array("{\"notificationType\": \"DID_RENEW\", \"notificationUUID\": \"\(notification.uuid)\", ".utf8))
        case .oversized:
            struct Padded: Encodable {
                var notificationType: String
                var notificationUUID: String
                var signedDate: Int64
                var padding: String
            }
            return try signer.sign(
                Padded(notificationType: notification.type.rawValue, notificationUUID: notification.uuid, signedDate: notification.signedDate, padding: String(repeating: "A", count: 1 << 20))
            )
        case .unknownType:
            type = NotificationType(rawValue: "SOMETHING_APPLE_ADDS_LATER")
            subtype = nil
        }
        let payload = NotificationPayload(
            notificationType: type, subtype: subtype, notificationUUID: notification.uuid, signedDate: notification.signedDate,
            data: NotificationData(
                appAppleId: appAppleId, bundleId: bundleId, bundleVersion: "1", environment: environment,
                signedTransactionInfo: try signer.sign(notification.transaction),
                signedRenewalInfo: try notification.renewalInfo.map { try signer.sign($0) }, status: notification.status
            )
        )
        return try signer.sign(payload)
    }

    /// The notification as Apple would have signed it at its `signedDate`.
    package func signNotification(_ notification: Scenario.Notification) throws -> String {
        if let kept = presigned.withLock({ $0[notification.uuid] }) { return kept }
        let configuration = scenario.configuration
        if let summary = notification.summary {
            return try signer.sign(
                NotificationPayload(
                    notificationType: notification.type, subtype: notification.subtype, notificationUUID: notification.uuid,
                    signedDate: notification.signedDate, summary: summary
                )
            )
        }
        let payload = NotificationPayload(
            notificationType: notification.type, subtype: notification.subtype, notificationUUID: notification.uuid,
            signedDate: notification.signedDate,
            data: NotificationData(
                appAppleId: configuration.environment == .production ? configuration.appAppleId : nil,
                bundleId: configuration.bundleId, bundleVersion: "1", environment: configuration.environment,
                signedTransactionInfo: try signer.sign(notification.transaction),
                signedRenewalInfo: try notification.renewalInfo.map { try signer.sign($0) }, status: notification.status
            )
        )
        return try signer.sign(payload)
    }

    // MARK: Get Transaction History

    func transactionHistory(id: String, query: [(String, String)], now: Date) -> Answer {
        guard !id.isEmpty, id.allSatisfy(\.isNumber) else { return .error(400, 4_000_006, "Invalid transaction id.") }
        guard let customer = scenario.customer(forTransactionId: id) else { return .error(404, 4_040_010, "Transaction id not found.") }
        if let failure = options.failingAccounts[customer.index] { return .error(failure.status, failure.code, failure.message) }
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        let sort = query.first { $0.0 == "sort" }?.1 ?? "ASCENDING"
        guard sort == "ASCENDING" || sort == "DESCENDING" else { return .error(400, 4_000_021, "Invalid request. The sort parameter is invalid.") }
        let revoked = query.first { $0.0 == "revoked" }?.1
        let productIds = query.filter { $0.0 == "productId" }.map(\.1)

        // Each transaction at its latest modification: a refunded one moves to the end.
        var latest: [String: Scenario.TransactionVersion] = [:]
        for version in customer.transactionVersions where version.modified <= nowMs {
            latest[version.transaction.transactionId!] = version
        }
        Self.applyExtensions(state.withLock { $0.extensions }, customer: customer, to: &latest)
        var items = latest.values.sorted { ($0.modified, $0.transaction.transactionId!) < ($1.modified, $1.transaction.transactionId!) }
        if let revoked { items = items.filter { ($0.transaction.revocationDate != nil) == (revoked == "true") } }
        if !productIds.isEmpty { items = items.filter { productIds.contains($0.transaction.productId ?? "") } }
        if sort == "DESCENDING" { items.reverse() }

        var startIndex = 0
        if let revision = query.first(where: { $0.0 == "revision" })?.1 {
            // A revision is a cursor over one account's history: another account's is refused.
            guard let cursor = Self.decodeRevision(revision), cursor.1.isEmpty || scenario.customer(forTransactionId: cursor.1)?.index == customer.index else {
                return .error(400, 4_000_005, "Invalid request revision.")
            }
            startIndex = items.firstIndex { sort == "ASCENDING" ? Self.key($0) > cursor : Self.key($0) < cursor } ?? items.count
        }
        let page = Array(items[startIndex...].prefix(Self.pageSize))
        let hasMore = startIndex + page.count < items.count
        let cursor = page.last.map(Self.key) ?? query.first(where: { $0.0 == "revision" }).flatMap { Self.decodeRevision($0.1) } ?? (0, "")
        let signed = page.map { version -> String in
            var transaction = version.transaction
            transaction.signedDate = nowMs
            return (try? signer.sign(transaction)) ?? ""
        }
        let configuration = scenario.configuration
        return .json(
            HistoryResponseBody(
                revision: Self.encodeRevision(cursor), hasMore: hasMore, bundleId: configuration.bundleId,
                appAppleId: configuration.appAppleId, environment: configuration.environment.rawValue, signedTransactions: signed
            ).jsonText
        )
    }

    struct HistoryResponseBody: Encodable {
        var revision: String
        var hasMore: Bool
        var bundleId: String
        var appAppleId: Int64
        var environment: String
        var signedTransactions: [String]

        /// What `JSONEncoder` with `.sortedKeys` writes, written by hand (see `JSONText`).
        var jsonText: JSONText {
            var json = JSONText(capacity: signedTransactions.reduce(512) { $0 + $1.utf8.count + 3 })
            json.raw("{")
            json.key("appAppleId")
            json.int(appAppleId)
            json.raw(",")
            json.key("bundleId")
            json.string(bundleId)
            json.raw(",")
            json.key("environment")
            json.string(environment)
            json.raw(",")
            json.key("hasMore")
            json.bool(hasMore)
            json.raw(",")
            json.key("revision")
            json.string(revision)
            json.raw(",")
            json.key("signedTransactions")
            json.array(signedTransactions) { json, signed in json.string(signed) }
            json.raw("}")
            return json
        }
    }

    static func key(_ version: Scenario.TransactionVersion) -> (Int64, String) { (version.modified, version.transaction.transactionId!) }

    static func encodeRevision(_ cursor: (Int64, String)) -> String {
        Base64URL.encode(Array("rev:\(cursor.0):\(cursor.1)".utf8))
    }

    static func decodeRevision(_ text: String) -> (Int64, String)? {
        guard let bytes = Base64URL.decode(Substring(text)) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "rev", let modified = Int64(parts[1]) else { return nil }
        return (modified, String(parts[2]))
    }

    // MARK: Get All Subscription Statuses

    func subscriptionStatuses(id: String, now: Date) -> Answer {
        guard !id.isEmpty, id.allSatisfy(\.isNumber) else { return .error(400, 4_000_006, "Invalid transaction id.") }
        guard let customer = scenario.customer(forTransactionId: id) else { return .error(404, 4_040_010, "Transaction id not found.") }
        if let failure = options.failingAccounts[customer.index] { return .error(failure.status, failure.code, failure.message) }
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        // Every auto-renewable subscription of the account, grouped by subscription group, each
        // signed now: an unchanged subscription comes back with a new signedDate every time.
        var groups: [String: [StatusResponseBody.Group.Last]] = [:]
        var groupOrder: [String] = []
        let extensions = state.withLock { $0.extensions }
        for subscription in customer.subscriptions {
            var transaction = subscription.latestTransaction
            transaction.signedDate = nowMs
            var renewal = subscription.renewalInfo
            renewal?.signedDate = nowMs
            let shift = Self.shift(subscription.originalTransactionId, extensions)
            if shift > 0 {
                transaction.expiresDate = transaction.expiresDate.map { $0 + shift }
                if renewal?.renewalDate != nil { renewal?.renewalDate! += shift }
            }
            let group = transaction.subscriptionGroupIdentifier ?? ""
            if groups[group] == nil { groupOrder.append(group) }
            groups[group, default: []].append(
                .init(
                    status: subscription.subscriptionStatus?.rawValue ?? 1, originalTransactionId: subscription.originalTransactionId,
                    signedTransactionInfo: (try? signer.sign(transaction)) ?? "",
                    signedRenewalInfo: renewal.flatMap { try? signer.sign($0) } ?? ""
                )
            )
        }
        let configuration = scenario.configuration
        let body = StatusResponseBody(
            environment: configuration.environment.rawValue, bundleId: configuration.bundleId, appAppleId: configuration.appAppleId,
            data: groupOrder.map { .init(subscriptionGroupIdentifier: $0, lastTransactions: groups[$0]!) }
        )
        return .json(body)
    }

    struct StatusResponseBody: Encodable {
        struct Group: Encodable {
            struct Last: Encodable {
                var status: Int
                var originalTransactionId: String
                var signedTransactionInfo: String
                var signedRenewalInfo: String
            }
            var subscriptionGroupIdentifier: String
            var lastTransactions: [Last]
        }
        var environment: String
        var bundleId: String
        var appAppleId: Int64
        var data: [Group]
    }

    // MARK: Test notifications

    func requestTestNotification(now: Date) -> Answer {
        let token = UUID().uuidString.lowercased() + "_" + String(Int64(now.timeIntervalSince1970 * 1000))
        let configuration = scenario.configuration
        let payload = NotificationPayload(
            notificationType: .test, notificationUUID: UUID().uuidString.lowercased(), signedDate: Int64(now.timeIntervalSince1970 * 1000),
            data: NotificationData(
                appAppleId: configuration.environment == .production ? configuration.appAppleId : nil,
                bundleId: configuration.bundleId, environment: configuration.environment
            )
        )
        let signed = (try? signer.sign(payload)) ?? ""
        let url = state.withLock { state in
            state.testNotifications[token] = TestNotification(sent: now, signedPayload: signed, result: nil)
            return state.webhookURL
        }
        if let url {
            Task {
                let result = await Self.post(signed, to: url)
                self.state.withLock { $0.testNotifications[token]?.result = result }
            }
        } else {
            state.withLock { $0.testNotifications[token]?.result = options.webhookReachable ? "SUCCESS" : "NO_RESPONSE" }
        }
        return .json(["testNotificationToken": token])
    }

    /// Apple's delivery of a notification: a POST of `{"signedPayload":"…"}`; the send attempt's result.
    static func post(_ signedPayload: String, to url: String) async -> String {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: "{\"signedPayload\":\"\(signedPayload)\"}"))
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            _ = try? await response.body.collect(upTo: 4096)
            return (200..<300).contains(Int(response.status.code)) ? "SUCCESS" : "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        } catch {
            return "NO_RESPONSE"
        }
    }

    func testNotificationStatus(token: String, now: Date) -> Answer {
        guard let sent = state.withLock({ $0.testNotifications[token] }) else {
            return .error(404, 4_040_008, "Test notification not found.")
        }
        struct Body: Encodable {
            struct Attempt: Encodable { var attemptDate: Int64; var sendAttemptResult: String }
            var signedPayload: String
            var sendAttempts: [Attempt]
        }
        let sentMs = Int64(sent.sent.timeIntervalSince1970 * 1000)
        return .json(
            Body(signedPayload: sent.signedPayload, sendAttempts: sent.result.map { [.init(attemptDate: sentMs + 1000, sendAttemptResult: $0)] } ?? [])
        )
    }
}

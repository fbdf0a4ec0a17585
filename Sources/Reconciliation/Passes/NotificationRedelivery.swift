import AsyncHTTPClient
import Foundation
import Ledger
import Logging
import NIOCore
import NIOHTTP1

/// Sends the team's webhook handler the recovered notifications it has not had: each one's
/// original signed body, `{"signedPayload":"<JWS>"}` with `Content-Type: application/json`,
/// exactly as Apple POSTs it, one at a time, each round in `signedDate` order. Each answer is
/// committed to `app_store.deliveries` before the next POST: a 2xx marks the notification
/// delivered to the target for good; anything else (another status, a redirect, no answer within
/// the timeout) counts an attempt and leaves it pending. The policy's later rounds retry what the
/// earlier ones could not deliver (so a retried notification may arrive after later ones, as with
/// Apple's own retries); what no round delivered stays pending for the next run or `deliver --to`.
///
/// One deliverer per target at a time (`LedgerStore.withDeliveryLock`), and each row is read
/// again just before its POST, so that one delivered meanwhile is not sent again. A stop request
/// ends the delivery after the POST in hand, its answer recorded.
package struct NotificationRedelivery: Sendable {
    package let store: LedgerStore
    package let target: DeliveryTarget
    package let policy: DeliveryPolicy
    package let logger: Logger
    package let stop: StopRequest

    package init(store: LedgerStore, target: DeliveryTarget, policy: DeliveryPolicy = DeliveryPolicy(), logger: Logger, stop: StopRequest = StopRequest()) {
        self.store = store
        self.target = target
        self.policy = policy
        self.logger = logger
        self.stop = stop
    }

    /// Delivers what is pending for the target: the rounds of the policy, in order.
    package func deliverPending() async throws -> RedeliverySummary {
        try await store.withDeliveryLock(target: target.url) {
            // A client of its own: redirects are not followed (see `DeliveryPolicy.delivers`).
            var configuration = HTTPClient.Configuration()
            configuration.redirectConfiguration = .disallow
            let httpClient = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
            do {
                let summary = try await rounds(httpClient)
                try await httpClient.shutdown()
                return summary
            } catch {
                try? await httpClient.shutdown()
                throw error
            }
        }
    }

    private func rounds(_ httpClient: HTTPClient) async throws -> RedeliverySummary {
        var summary = RedeliverySummary(target: target.description)
        var refused: Set<UUID> = []
        rounds: for round in 1...policy.rounds {
            if round > 1 {
                guard !refused.isEmpty else { break }
                logger.info("re-delivery: \(refused.count) not delivered; round \(round) of \(policy.rounds) after \(policy.delay(beforeRound: round))")
                if try await !pause(policy.delay(beforeRound: round)) { break }
            }
            var refusedThisRound: Set<UUID> = []
            var unansweredInARow = 0
            var cursor: (Date, UUID)?
            pages: while true {
                let chunk = try await store.pendingDeliveries(to: target.url, after: cursor, limit: 200)
                guard let last = chunk.last else { break }
                for pending in chunk {
                    if stop.isRequested { break rounds }
                    guard try await store.deliveryIsPending(pending.notificationUUID, to: target.url) else { continue }
                    let answer = await post(pending.signedPayload, with: httpClient)
                    let delivered = answer.status.map(DeliveryPolicy.delivers) ?? false
                    try await store.recordDeliveryAttempt(
                        pending.notificationUUID, to: target.url, status: answer.status, error: delivered ? nil : answer.problem, delivered: delivered
                    )
                    summary.attempts += 1
                    if delivered {
                        summary.delivered += 1
                        refused.remove(pending.notificationUUID)
                    } else {
                        refused.insert(pending.notificationUUID)
                        refusedThisRound.insert(pending.notificationUUID)
                    }
                    unansweredInARow = answer.status == nil ? unansweredInARow + 1 : 0
                    if unansweredInARow >= policy.unansweredInARowEndingARound {
                        logger.warning("re-delivery: \(unansweredInARow) POSTs in a row got no answer; the rest of this round waits")
                        break pages
                    }
                }
                cursor = (last.signedDate, last.notificationUUID)
            }
            refused = refusedThisRound
        }
        summary.stopped = stop.isRequested
        summary.failed = refused.count
        summary.pending = try await store.pendingDeliveryCount(to: target.url)
        return summary
    }

    /// Waits `delay`, a slice at a time so that a stop request ends it; false when stopped.
    private func pause(_ delay: Duration) async throws -> Bool {
        let end = ContinuousClock.now + delay
        while ContinuousClock.now < end {
            if stop.isRequested { return false }
            try await Task.sleep(for: min(.milliseconds(100), end - ContinuousClock.now))
        }
        return !stop.isRequested
    }

    /// A dry run's list: what is pending for the target, and the notifications the run would
    /// record (`recovered`: notificationUUID and signedDate), merged in `signedDate` order.
    package func wouldDeliver(adding recovered: [(uuid: String, signedDate: Date)]) async throws -> RedeliverySummary {
        var summary = RedeliverySummary(target: target.description)
        let pending = try await store.pendingDeliveryList(to: target.url).map { (uuid: $0.uuid.uuidString.lowercased(), signedDate: $0.signedDate) }
        let known = Set(pending.map(\.uuid))
        let merged = (pending + recovered.filter { !known.contains($0.uuid.lowercased()) }.map { (uuid: $0.uuid.lowercased(), signedDate: $0.signedDate) })
            .sorted { ($0.signedDate, $0.uuid) < ($1.signedDate, $1.uuid) }
        summary.wouldDeliver = merged.map(\.uuid)
        summary.pending = merged.count
        return summary
    }

    /// One POST: the status, or why there was none; and for a non-2xx, what to keep as the error.
    func post(_ signedPayload: String, with httpClient: HTTPClient) async -> (status: Int?, problem: String?) {
        var request = HTTPClientRequest(url: target.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: "{\"signedPayload\":\"\(signedPayload)\"}"))
        do {
            let response = try await httpClient.execute(request, timeout: .nanoseconds(Int64(policy.requestTimeout / .nanoseconds(1))))
            // The body is not needed; read a little of it, so that the connection can be reused.
            let body = try? await response.body.collect(upTo: 4096)
            let status = Int(response.status.code)
            if DeliveryPolicy.delivers(status: status) { return (status, nil) }
            let text = body.map { String(buffer: $0) }.map { String($0.prefix(200)) } ?? ""
            return (status, "HTTP \(status)" + (text.isEmpty ? "" : ": \(text)"))
        } catch {
            return (nil, "no answer: \(String(describing: error).prefix(200))")
        }
    }
}

import AsyncHTTPClient
import Foundation
import Ledger
import Logging
import NIOCore
import NIOHTTP1

/// Sends the team's webhook handler the recovered notifications it has not had: each one's
/// original signed body, `{"signedPayload":"<JWS>"}` with `Content-Type: application/json`,
/// exactly as Apple POSTs it, in `signedDate` order, one at a time. Each answer is committed to
/// `app_store.deliveries` before the next POST: a 2xx marks the notification delivered to the
/// target for good; anything else (another status, no answer within the timeout) counts an
/// attempt and leaves it pending. The policy's later rounds retry what the earlier ones could not
/// deliver; what no round delivered stays pending for the next run or `deliver --to`.
///
/// One deliverer per target at a time (`LedgerStore.withDeliveryLock`). A stop request ends the
/// delivery after the POST in hand, its answer recorded.
package struct NotificationRedelivery: Sendable {
    package let store: LedgerStore
    package let target: DeliveryTarget
    package let policy: DeliveryPolicy
    package let logger: Logger
    package let stop: StopRequest
    let httpClient: HTTPClient

    package init(
        store: LedgerStore, target: DeliveryTarget, policy: DeliveryPolicy = DeliveryPolicy(), logger: Logger, stop: StopRequest = StopRequest(),
        httpClient: HTTPClient = .shared
    ) {
        self.store = store
        self.target = target
        self.policy = policy
        self.logger = logger
        self.stop = stop
        self.httpClient = httpClient
    }

    /// Delivers what is pending for the target: the rounds of the policy, in order.
    package func deliverPending() async throws -> RedeliverySummary {
        try await store.withDeliveryLock(target: target.url) {
            var summary = RedeliverySummary(target: target.description)
            var refused: Set<UUID> = []
            rounds: for round in 1...policy.rounds {
                if round > 1 {
                    guard !refused.isEmpty else { break }
                    logger.info("re-delivery: \(refused.count) refused; round \(round) of \(policy.rounds) after \(policy.delay(beforeRound: round))")
                    try await Task.sleep(for: policy.delay(beforeRound: round))
                }
                var refusedThisRound: Set<UUID> = []
                var cursor: (Date, UUID)?
                while true {
                    let chunk = try await store.pendingDeliveries(to: target.url, after: cursor, limit: 200)
                    guard let last = chunk.last else { break }
                    for pending in chunk {
                        if stop.isRequested { break rounds }
                        let answer = await post(pending.signedPayload)
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
                    }
                    cursor = (last.signedDate, last.notificationUUID)
                }
                refused = refusedThisRound
            }
            summary.failed = refused.count
            summary.pending = try await store.pendingDeliveryCount(to: target.url)
            return summary
        }
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
    func post(_ signedPayload: String) async -> (status: Int?, problem: String?) {
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

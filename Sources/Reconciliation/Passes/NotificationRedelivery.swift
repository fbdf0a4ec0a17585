import AsyncHTTPClient
package import Decisions
package import Foundation
package import Ledger
package import Logging
import NIOCore
import NIOHTTP1

/// Sends the team's webhook handler the recovered notifications it has not had: each one's
/// original signed body, `{"signedPayload":"<JWS>"}` with `Content-Type: application/json`,
/// exactly as Apple POSTs it, with the target's headers. Each round takes what is pending fewest
/// attempts first, then in `signedDate` order (so one that keeps timing out waits behind the
/// others), with at most `policy.concurrency` POSTs under way. Each answer is committed to
/// `app_store.deliveries` as it comes: a 2xx marks the notification delivered to the target for
/// good; anything else (another status, a redirect, no answer within the timeout) counts an
/// attempt and leaves it pending, or parks it as failed after `policy.maximumAttempts`. The
/// policy's later rounds retry what the earlier ones could not deliver (so a retried notification
/// may arrive after later ones, as with Apple's own retries); what no round delivered stays
/// pending for the next run or `deliver`.
///
/// One deliverer per target at a time (`LedgerStore.withDeliveryLock`), and each row is read
/// again just before its POST, so that one delivered meanwhile is not sent again. A stop request
/// ends the delivery once the POSTs under way are answered (or time out), their answers recorded.
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

    /// Delivers what is pending for the target: the rounds of the policy, in order. With
    /// `dueOnly`, only what is due after its last attempt's pause (`serve`'s forwarder).
    package func deliverPending(dueOnly: Bool = false) async throws -> RedeliverySummary {
        try await store.withDeliveryLock(target: target.key) {
            // A client of its own: redirects are not followed (see `DeliveryPolicy.delivers`).
            var configuration = HTTPClient.Configuration()
            configuration.redirectConfiguration = .disallow
            let httpClient = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
            do {
                let summary = try await rounds(httpClient, dueOnly: dueOnly)
                try await httpClient.shutdown()
                return summary
            } catch {
                try? await httpClient.shutdown()
                throw error
            }
        }
    }

    /// One POST's outcome, as its task reports it.
    private struct Attempt: Sendable {
        var uuid: UUID
        /// False: not sent (delivered or parked meanwhile).
        var sent = true
        /// Nil: no answer came.
        var status: Int?
        var delivered = false
        var parked = false
    }

    private func rounds(_ httpClient: HTTPClient, dueOnly: Bool) async throws -> RedeliverySummary {
        var summary = RedeliverySummary(target: target.description)
        var refused: Set<UUID> = []
        rounds: for round in 1...policy.rounds {
            if round > 1 {
                guard !refused.isEmpty else { break }
                logger.info("re-delivery: \(refused.count) not delivered; round \(round) of \(policy.rounds) after \(policy.delay(beforeRound: round))")
                if try await !pause(policy.delay(beforeRound: round)) { break }
            }
            let queue = try await store.deliveryQueue(to: target.key, dueOnly: dueOnly)
            var refusedThisRound: Set<UUID> = []
            var unansweredInARow = 0
            try await withThrowingTaskGroup(of: Attempt.self) { group in
                // Children are added in the body, not from a nested function capturing the group:
                // the release build miscompiled that form in `detect-outage` (issue 48, point 0).
                var position = 0
                var cut = false
                while position < min(policy.concurrency, queue.count), !stop.isRequested {
                    let uuid = queue[position]
                    position += 1
                    group.addTask { try await self.attempt(uuid, with: httpClient) }
                }
                while let attempt = try await group.next() {
                    if attempt.sent {
                        summary.attempts += 1
                        if attempt.delivered {
                            summary.delivered += 1
                            refused.remove(attempt.uuid)
                        } else {
                            refused.insert(attempt.uuid)
                            refusedThisRound.insert(attempt.uuid)
                            if attempt.parked { summary.parked += 1 }
                        }
                        unansweredInARow = attempt.status == nil ? unansweredInARow + 1 : 0
                        if !cut, unansweredInARow >= policy.unansweredInARowEndingARound {
                            cut = true
                            logger.warning("re-delivery: \(unansweredInARow) POSTs in a row got no answer; the rest of this round waits")
                        }
                    }
                    if !cut, !stop.isRequested, position < queue.count {
                        let uuid = queue[position]
                        position += 1
                        group.addTask { try await self.attempt(uuid, with: httpClient) }
                    }
                }
            }
            if stop.isRequested { break rounds }
            refused = refusedThisRound
        }
        summary.stopped = stop.isRequested
        summary.failed = refused.count
        let counts = try await store.deliveryCounts(to: target.key)
        summary.pending = counts.pending
        summary.parkedInAll = counts.failed
        return summary
    }

    /// One notification: read again, POSTed, its answer recorded.
    private func attempt(_ uuid: UUID, with httpClient: HTTPClient) async throws -> Attempt {
        guard let pending = try await store.pendingDelivery(uuid, to: target.key) else { return Attempt(uuid: uuid, sent: false) }
        let answer = await post(pending.signedPayload, with: httpClient, timeout: policy.requestTimeout(afterAttempts: pending.attempts))
        let delivered = answer.status.map(DeliveryPolicy.delivers) ?? false
        let parked = try await store.recordDeliveryAttempt(
            uuid, to: target.key, status: answer.status, error: delivered ? nil : answer.problem, delivered: delivered, maximumAttempts: policy.maximumAttempts
        )
        if parked {
            logger.warning("re-delivery: a notification was refused \(policy.maximumAttempts) times and is parked as failed (deliver --list, deliver --retry-failed)",
                metadata: ["notificationUUID": "\(uuid.uuidString.lowercased())"])
        }
        return Attempt(uuid: uuid, status: answer.status, delivered: delivered, parked: parked)
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
        let pending = try await store.pendingDeliveryList(to: target.key).map { (uuid: $0.uuid.uuidString.lowercased(), signedDate: $0.signedDate) }
        let known = Set(pending.map(\.uuid))
        let merged = (pending + recovered.filter { !known.contains($0.uuid.lowercased()) }.map { (uuid: $0.uuid.lowercased(), signedDate: $0.signedDate) })
            .sorted { ($0.signedDate, $0.uuid) < ($1.signedDate, $1.uuid) }
        summary.wouldDeliver = merged.map(\.uuid)
        summary.pending = merged.count
        return summary
    }

    /// One POST: the status, or why there was none; and for a non-2xx, what to keep as the error.
    func post(_ signedPayload: String, with httpClient: HTTPClient, timeout: Duration) async -> (status: Int?, problem: String?) {
        var request = HTTPClientRequest(url: target.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        for field in target.headers.fields { request.headers.add(name: field.name, value: field.value) }
        request.body = .bytes(ByteBuffer(string: "{\"signedPayload\":\"\(signedPayload)\"}"))
        do {
            let response = try await httpClient.execute(request, timeout: .nanoseconds(Int64(timeout / .nanoseconds(1))))
            // The body is not needed; read a little of it, so that the connection can be reused.
            let body = try? await response.body.collect(upTo: 4096)
            let status = Int(response.status.code)
            if DeliveryPolicy.delivers(status: status) { return (status, nil) }
            let text = body.map { String(buffer: $0) }.map { String($0.prefix(200)) } ?? ""
            return (status, "HTTP \(status)" + (text.isEmpty ? "" : ": \(text)"))
        } catch {
            // The error's text may name the URL: only its kind is kept (the ledger and logs hold no URL).
            return (nil, "no answer: \(Self.kind(of: error))")
        }
    }

    /// What went wrong, without anything the error's text could quote (a URL, a token).
    static func kind(of error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .getConnectionFromPoolTimeout: return "timed out"
            case .remoteConnectionClosed: return "the connection was closed"
            default: return "HTTP client error"
            }
        }
        return String(describing: type(of: error))
    }
}

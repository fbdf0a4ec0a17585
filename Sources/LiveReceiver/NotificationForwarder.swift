package import Decisions
import Foundation
package import Reconciliation
package import Ledger
package import Logging
import ServiceLifecycle
import Synchronization

/// `serve --forward-to`: hands each notification `serve` records to the team's own handler,
/// through the ledger's delivery table (`app_store.deliveries`), so that a failing handler never
/// makes Apple's delivery fail and nothing is lost. Ingest queues the notification in the same
/// statement that records it; this service sends what is due when woken (by each recorded
/// notification) or when the next retry falls due. Each pass is one round of
/// `NotificationRedelivery` over what is due: fewest attempts first, a few POSTs at once, each
/// answer committed as it comes, a 2xx final. A refused notification is due again after a pause
/// that doubles with each attempt (1 s, 2 s, 4 s … at most an hour), and is parked as failed
/// after the policy's maximum attempts, so a handler that hangs or refuses one notification
/// delays the others by one timeout at most and is never sent anything without end.
package final class NotificationForwarder: Service, Sendable {
    package let redelivery: NotificationRedelivery
    /// The longest this waits without looking at the queue (a notification recorded by another
    /// serve, or un-parked by `deliver --retry-failed`).
    package let idleLook: Duration
    private let woken = Mutex(true)

    package init(store: LedgerStore, target: DeliveryTarget, policy: DeliveryPolicy = DeliveryPolicy(), logger: Logger, idleLook: Duration = .seconds(60)) {
        var policy = policy
        policy.rounds = 1
        self.redelivery = NotificationRedelivery(store: store, target: target, policy: policy, logger: logger)
        self.idleLook = idleLook
    }

    /// Something new is queued: send it now.
    package func wake() { woken.withLock { $0 = true } }

    package func run() async throws {
        let stop = redelivery.stop
        await withGracefulShutdownHandler {
            while !stop.isRequested, !Task.isCancelled {
                woken.withLock { $0 = false }
                var wait = idleLook
                do {
                    _ = try await redelivery.deliverPending(dueOnly: true)
                    if let due = try await redelivery.store.nextDeliveryDue(to: redelivery.target.key) { wait = min(due, idleLook) }
                } catch is DeliveryInProgress {
                    // Another deliverer (`deliver`, another serve) holds the target: look again later.
                    wait = .seconds(5)
                } catch {
                    wait = .seconds(5)
                    redelivery.logger.warning("forwarding: \(String(describing: type(of: error))); trying again in \(wait)")
                }
                // Notifications recorded meanwhile end the wait; a pass costs at least 100 ms.
                let end = ContinuousClock.now + max(wait, .milliseconds(100))
                try? await Task.sleep(for: .milliseconds(100))
                while ContinuousClock.now < end, !stop.isRequested, !Task.isCancelled, !woken.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(100)) }
            }
        } onGracefulShutdown: {
            stop.request()
        }
    }
}

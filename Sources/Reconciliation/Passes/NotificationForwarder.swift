import Foundation
import Ledger
import Logging
import ServiceLifecycle

/// `serve --forward-to`: hands each notification `serve` records to the team's own handler,
/// through the ledger's delivery table (`app_store.deliveries`), so that a failing handler never
/// makes Apple's delivery fail and nothing is lost. Ingest queues the notification in the same
/// statement that records it; this service sends what is pending when woken (by each recorded
/// notification) or, while the handler refuses something, after a `ForwardingPause` (new
/// notifications then wait for that pass). Each pass is
/// three rounds of `NotificationRedelivery` (what is refused is tried again after 1 s and 2 s): in
/// `signedDate` order, each answer committed before the next POST, a 2xx final.
package struct NotificationForwarder: Service {
    package let redelivery: NotificationRedelivery
    package let firstRetry: Duration
    package let maximumRetry: Duration
    private let wakes: AsyncStream<Void>
    private let waker: AsyncStream<Void>.Continuation

    package init(store: LedgerStore, target: DeliveryTarget, logger: Logger, firstRetry: Duration = .seconds(1), maximumRetry: Duration = .seconds(30)) {
        self.redelivery = NotificationRedelivery(store: store, target: target, policy: DeliveryPolicy(rounds: 3, firstDelay: .seconds(1), maximumDelay: .seconds(2)), logger: logger)
        self.firstRetry = firstRetry
        self.maximumRetry = maximumRetry
        (wakes, waker) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Something new is queued: send it now.
    package func wake() { waker.yield() }

    package func run() async throws {
        let stop = redelivery.stop
        let waker = self.waker
        await withGracefulShutdownHandler {
            var pauses = ForwardingPause(first: firstRetry, maximum: maximumRetry)
            var iterator = wakes.makeAsyncIterator()
            // What an earlier serve left is sent at the start.
            repeat {
                var pause: Duration?
                do {
                    let summary = try await redelivery.deliverPending()
                    pause = pauses.after(pending: summary.pending, delivered: summary.delivered)
                } catch is DeliveryInProgress {
                    // Another deliverer (`deliver`, another serve) holds the target: later.
                    pause = pauses.after(pending: 1, delivered: 0)
                } catch {
                    pause = pauses.after(pending: 1, delivered: 0)
                    redelivery.logger.warning("forwarding: \(String(describing: type(of: error))); trying again in \(pause ?? firstRetry)")
                }
                if stop.isRequested { break }
                if let pause {
                    // Notifications arriving during the pause wait for the next pass, so a steady
                    // stream of them cannot turn the pauses into a busy loop.
                    let end = ContinuousClock.now + pause
                    while ContinuousClock.now < end, !stop.isRequested { try? await Task.sleep(for: .milliseconds(100)) }
                } else {
                    guard await iterator.next() != nil else { break }
                }
            } while !stop.isRequested
        } onGracefulShutdown: {
            stop.request()
            waker.finish()
        }
    }
}

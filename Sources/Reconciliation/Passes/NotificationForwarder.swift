import Foundation
import Ledger
import Logging
import ServiceLifecycle

/// `serve --forward-to`: hands each notification `serve` records to the team's own handler,
/// through the ledger's delivery table (`app_store.deliveries`), so that a failing handler never
/// makes Apple's delivery fail and nothing is lost. Ingest queues the notification in the same
/// statement that records it; this service sends what is pending when woken (by each recorded
/// notification) and, while something is left, again after a pause that doubles from
/// `firstRetry` up to `maximumRetry`. Each send is one round of `NotificationRedelivery`: in
/// `signedDate` order, each answer committed before the next POST, a 2xx final.
package struct NotificationForwarder: Service {
    package let redelivery: NotificationRedelivery
    package let firstRetry: Duration
    package let maximumRetry: Duration
    private let wakes: AsyncStream<Void>
    private let waker: AsyncStream<Void>.Continuation

    package init(store: LedgerStore, target: DeliveryTarget, logger: Logger, firstRetry: Duration = .seconds(1), maximumRetry: Duration = .seconds(30)) {
        self.redelivery = NotificationRedelivery(store: store, target: target, policy: DeliveryPolicy(rounds: 1), logger: logger)
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
            var retry = firstRetry
            var iterator = wakes.makeAsyncIterator()
            // What an earlier serve left is sent at the start.
            repeat {
                var pending = true
                do {
                    pending = try await redelivery.deliverPending().pending > 0
                } catch is DeliveryInProgress {
                    // Another deliverer (`deliver`, another serve) holds the target: later.
                } catch {
                    redelivery.logger.warning("forwarding: \(String(describing: type(of: error))); trying again in \(retry)")
                }
                if stop.isRequested { break }
                // Something left: a retry after a pause that doubles while it stays; a new
                // notification wakes this sooner.
                let timer: Task<Void, Never>? = pending ? Task { [retry] in
                    try? await Task.sleep(for: retry)
                    waker.yield()
                } : nil
                retry = pending ? min(retry * 2, maximumRetry) : firstRetry
                let woken = await iterator.next() != nil
                timer?.cancel()
                if !woken { break }
            } while !stop.isRequested
        } onGracefulShutdown: {
            stop.request()
            waker.finish()
        }
    }
}

package import Decisions
package import Foundation
package import Reconciliation
import Ledger
package import SignedData
import Synchronization

/// What `serve` answers Apple for one POST of a notification: the body read, the notification
/// verified and recorded through the same path as `ingest`, and the answer chosen so that Apple
/// retries exactly what was not recorded. A 200 only after the notification is committed (or
/// was already); 400 for what no retry can mend (a body that is not Apple's, a payload that fails
/// verification, kept in `app_store.rejected_payloads`); 503 for everything temporary (the
/// database unreachable, a revocation check that could not be made), so that Apple sends it again.
package struct NotificationReceiver: Sendable {
    package enum Answer: Sendable, Hashable {
        case recorded
        case alreadyRecorded
        case rejected(RejectionReason)
        case badBody(String)
        case retryLater(String)
        case unavailable(String)
        /// Not taken: the queue for the database is full.
        case overloaded

        package var status: Int {
            switch self {
            case .recorded, .alreadyRecorded: 200
            case .rejected, .badBody: 400
            case .retryLater, .unavailable, .overloaded: 503
            }
        }

        /// Seconds a client should wait before sending it again, for the answers that say.
        package var retryAfter: Int? {
            self == .overloaded ? 5 : nil
        }

        /// The metrics' `outcome` label.
        package var outcome: String {
            switch self {
            case .recorded: "recorded"
            case .alreadyRecorded: "already_recorded"
            case .rejected: "rejected"
            case .badBody: "bad_body"
            case .retryLater: "retry_later"
            case .unavailable: "unavailable"
            case .overloaded: "overloaded"
            }
        }

        /// The response body: a short reason, never the payload.
        package var text: String {
            switch self {
            case .recorded: "recorded\n"
            case .alreadyRecorded: "already recorded\n"
            case .rejected(let reason): "rejected: \(reason.rawValue)\n"
            case .badBody(let why): "bad request: \(why)\n"
            case .retryLater(let why): "not verified yet, retry later: \(why)\n"
            case .unavailable: "temporarily unavailable, retry later\n"
            case .overloaded: "busy, retry later\n"
            }
        }
    }

    /// Apple's bodies are a few tens of kilobytes (a JWS holding two more, each with its
    /// certificate chain); anything far larger is not Apple's.
    package static let maximumBodyBytes = 256 * 1024

    /// The first App Store's ingest: its store is the ledger every App Store's shares.
    package var ingest: NotificationIngest { ingests[0] }
    /// Every App Store this receives, in the configuration's order, each verified by its own
    /// verifier (its app, its `appAppleId`, its environment) and recorded under its own key.
    package let ingests: [NotificationIngest]
    /// The App Stores of `ingests`, in their order.
    package let pairs: [AppStorePair]
    /// When set, concurrent notifications are recorded together (`serve`); else one by one.
    package let batched: BatchedIngest?
    /// How long recording may take before the answer is 503: the database's pool waits for a
    /// server that is down without end, and Apple waits for an answer only so long.
    package let deadline: Duration

    /// Which rejected payloads are written to `app_store.rejected_payloads` (nil: every one).
    package let rejectionSample: Locked<RejectionSample>?
    /// The present, for the hour a rejection is sampled in (a test's own clock in tests).
    package var now: @Sendable () -> Date = { Date() }

    package init(ingest: NotificationIngest, batched: BatchedIngest? = nil, deadline: Duration = .seconds(10), keptRejectionsPerHour: Int? = nil) {
        self.init(ingests: [ingest], batched: batched, deadline: deadline, keptRejectionsPerHour: keptRejectionsPerHour)
    }

    /// The receiver of several App Stores (at least one; `batched`, when given, writes for each
    /// of them): a notification goes to the App Store its payload names (`NotificationRoute`).
    /// With `keptRejectionsPerHour`, only so many payloads that fail verification are written per
    /// reason and hour of the clock (`RejectionSample`); the others are answered 400 all the same.
    package init(ingests: [NotificationIngest], batched: BatchedIngest? = nil, deadline: Duration = .seconds(10), keptRejectionsPerHour: Int? = nil) {
        precondition(!ingests.isEmpty, "a receiver needs an App Store to record")
        self.rejectionSample = keptRejectionsPerHour.map { Locked(RejectionSample(keptPerHour: $0)) }
        self.ingests = ingests
        self.pairs = ingests.map(\.verifier.configuration.pair)
        self.batched = batched
        self.deadline = deadline
    }

    /// An answer, and the configured App Store whose notification it answers: only when that is
    /// proven (recorded, already recorded, or rejected for a nested payload after its own
    /// signature held for this App Store); nil for anything whose bytes could be anyone's, so
    /// that neither a forgery naming an app nor Apple's notification of another app is counted
    /// under it.
    package struct Routed: Sendable, Hashable {
        package var answer: Answer
        package var pair: AppStorePair?
        /// A rejection answered but not written: past its reason's sample for the hour.
        package var notKept = false

        package init(answer: Answer, pair: AppStorePair? = nil, notKept: Bool = false) {
            self.answer = answer
            self.pair = pair
            self.notKept = notKept
        }
    }

    /// The answer for a POST whose body is `body` (nil: it was over the limit).
    package func answer(body: [UInt8]?) async -> Answer {
        await routedAnswer(body: body).answer
    }

    /// The answer for a POST whose body is `body`, and the App Store it was recorded under.
    package func routedAnswer(body: [UInt8]?) async -> Routed {
        guard let body, body.count <= Self.maximumBodyBytes else { return Routed(answer: .badBody("the body is over \(Self.maximumBodyBytes) bytes")) }
        // A NUL (which PostgreSQL cannot keep in text) or a repeated key is refused here, as
        // `ingest` and `verify` refuse it: never by the database, where it would fail a batch
        // and read as an outage.
        let jws: String
        switch NotificationBody.signedPayload(in: body) {
        case .success(let payload): jws = payload
        case .failure(.holdsNUL): return Routed(answer: .badBody("the signedPayload holds a NUL character"))
        case .failure(.repeatedKey(let key)): return Routed(answer: .badBody("the body gives the key \(RepeatedJSONKey.quoted(key)) more than once"))
        case .failure: return Routed(answer: .badBody("expected Apple's body {\"signedPayload\": \"…\"}"))
        }
        // With one App Store, nothing is read before verifying (its verifier names what is wrong).
        let claimed = pairs.count > 1 ? UnverifiedPayload.claimedPair(ofNotification: jws) : nil
        let route = NotificationRoute.choose(claimed: claimed, configured: pairs)
        // An unconfigured App Store's payload is judged by the first App Store's verifier: only
        // to tell Apple's from a forgery (the roots are the deployment's, shared by every App Store).
        let (ingest, pair): (NotificationIngest, AppStorePair?)
        switch route {
        case .pair(let chosen): (ingest, pair) = (ingests.first { $0.verifier.configuration.pair == chosen } ?? ingests[0], chosen)
        case .unconfigured: (ingest, pair) = (ingests[0], nil)
        }
        let pairs = self.pairs
        let sample = self.rejectionSample
        do {
            let batched = self.batched
            let answerBy = ContinuousClock.now + deadline
            // The outcome, and whether it is a rejection left unwritten.
            let record: @Sendable () async throws -> (NotificationIngest.Outcome, Bool) = {
                var input = await ingest.verify(jws)
                if case .unconfigured(let claimed) = route, case .rejected(let judged) = input.outcome {
                    input.outcome = .rejected(NotificationRoute.rejection(unconfigured: claimed, judged: judged, configured: pairs))
                }
                // Past its reason's sample for the hour: answered, counted, not written.
                if case .rejected(let rejection) = input.outcome, let sample, !sample.withLock({ $0.keep(rejection.reason.rawValue, at: now()) }) {
                    return (.rejected(rejection), true)
                }
                if let batched {
                    return (
                        try await batched.ingest(verified: input, of: ingest.verifier.configuration.pair, bytes: jws.utf8.count, answerBy: answerBy),
                        false
                    )
                } else {
                    return (try await ingest.ingest(verified: [input])[0], false)
                }
            }
            guard let result = try await Self.within(deadline, record) else {
                return Routed(answer: .unavailable("no answer from the database within \(deadline)"))
            }
            let (outcome, notKept) = result
            let recordedUnder = ingest.verifier.configuration.pair
            switch outcome {
            case .recorded: return Routed(answer: .recorded, pair: recordedUnder)
            case .duplicate: return Routed(answer: .alreadyRecorded, pair: recordedUnder)
            // Counted under the App Store only when the notification is proven to be its own:
            // Apple's notification of another app, appAppleId or environment is anyone's to
            // send (issue 53: it made an operator's per-app alert fire), so it counts under none.
            case .rejected(let rejection):
                return Routed(
                    answer: .rejected(rejection.reason), pair: rejection.reason == .nestedPayloadRejected ? pair : nil,
                    notKept: notKept)
            case .retryLater(let reason): return Routed(answer: .retryLater(reason))
            }
        } catch is BatchedIngest.Overloaded {
            return Routed(answer: .overloaded)
        } catch {
            // The database, most likely; its message may quote data, so only the kind is kept.
            return Routed(answer: .unavailable(String(describing: type(of: error))))
        }
    }

    /// `operation`'s result, or nil when it takes longer than `limit`: it is then cancelled and
    /// not waited for. (A task group would wait for it, and a query whose server died under it
    /// was seen not to end on cancellation: the answer would have waited with it.) The deadline
    /// is kept by `DeadlineSweeper.shared`, so a call costs one task and no timer of its own.
    package static func within<Value: Sendable>(
        _ limit: Duration, sweeper: DeadlineSweeper = .shared, _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value? {
        let waiting = Mutex<CheckedContinuation<Value?, any Error>?>(nil)
        let work = Mutex<Task<Void, Never>?>(nil)
        let resume = { @Sendable (result: Result<Value?, any Error>) -> Bool in
            guard let continuation = waiting.withLock({ $0.take() }) else { return false }
            continuation.resume(with: result)
            return true
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                waiting.withLock { $0 = continuation }
                let ticket = sweeper.add(due: .now + limit) {
                    if resume(.success(nil)) { work.withLock { $0 }?.cancel() }
                }
                let task = Task {
                    let result: Result<Value?, any Error>
                    do { result = .success(try await operation()) } catch { result = .failure(error) }
                    sweeper.cancel(ticket)
                    _ = resume(result)
                }
                work.withLock { $0 = task }
                // Given up, or the caller cancelled, before the task was stored: cancelled here instead.
                if waiting.withLock({ $0 == nil }) || Task.isCancelled { task.cancel() }
            }
        } onCancel: {
            work.withLock { $0 }?.cancel()
        }
    }
}

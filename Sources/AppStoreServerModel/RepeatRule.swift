/// Whether a request may be sent again after an attempt that failed: the retry rule of each
/// endpoint, by what sending it twice does at Apple. A read may always be asked again. An
/// endpoint that changes something at Apple is sent again only where that cannot do it twice:
/// with the same `requestIdentifier`, which Apple applies once (Extend a Subscription Renewal
/// Date; the mass extension), or, without one, only when the attempt proves nothing was applied.
public enum RepeatRule: Hashable, Sendable {
    /// Reading: asking again changes nothing.
    case reads
    /// Changes something; the body carries a `requestIdentifier` Apple applies once, so the very
    /// same request may be sent again whatever became of the first (endpoints-that-change §3, §4).
    case sameRequestIdentifier
    /// Changes something, and Apple documents no identifier that makes a repeat harmless: sent
    /// again only after Apple answered with an error it says to send again after (429, 5xx, its
    /// retryable codes: Apple's own word that the request is to be repeated) or an attempt that
    /// never reached Apple (no connection made); never after an answer lost on the way back.
    case onlyIfNotApplied

    /// How an attempt that did not succeed ended.
    public enum AttemptEnd: Hashable, Sendable {
        /// Apple answered with this error status (one it says to send again after).
        case refused(status: Int)
        /// No complete answer; `mayHaveArrived` unless the connection was never made.
        case noAnswer(mayHaveArrived: Bool)
        /// Apple answered 2xx (applied) with a body that is not the documented JSON.
        case unreadableSuccess
    }

    /// Whether sending the request again cannot apply it twice, after `end`. (Whether it is worth
    /// sending again, a 400 say, is the error's own question.)
    public func mayRepeat(after end: AttemptEnd) -> Bool {
        switch (self, end) {
        case (.reads, _), (.sameRequestIdentifier, _): true
        case (.onlyIfNotApplied, .refused): true
        case (.onlyIfNotApplied, .noAnswer(let mayHaveArrived)): !mayHaveArrived
        case (.onlyIfNotApplied, .unreadableSuccess): false
        }
    }
}

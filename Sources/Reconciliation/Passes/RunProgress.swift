/// Where a long pass tells how far it has come: the passes call it, and the command line
/// connects it to a terminal (`ProgressLine` in ReconcileCLI: one live line on a terminal, a
/// plain line every few seconds in a log). The library writes nothing to a terminal itself.
package protocol RunProgress: Sendable {
    /// The current state, in words, and the requests made so far (which drive the rate shown).
    func update(_ text: String, requests: Int)
    /// The pass is over: whatever was drawn is cleared.
    func finish()
}

/// Progress told to no one: the default of the passes, and what tests and the library's other
/// callers get unless they connect a sink.
package struct NoProgress: RunProgress {
    package init() {}
    package func update(_ text: String, requests: Int) {}
    package func finish() {}
}

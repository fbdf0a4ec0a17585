/// Whether a run writes: report.json's `run.mode`.
package enum RunMode: String, Sendable, Codable {
    /// Fetches, verifies and compares; writes nothing to the ledger and reports what would change.
    case dryRun = "dry-run"
    /// Applies what was missed.
    case apply
}

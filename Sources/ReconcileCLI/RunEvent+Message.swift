import Decisions
import Foundation
import Logging
import Reconciliation
import SignedData

extension ReconciliationRun.Event {
    /// How much it matters to the operator (a JSON log line's level).
    var level: Logger.Level {
        switch self {
        case .shardWaitExpired, .redeliveryBusy, .metricsNotWritten: .warning
        case .recovering(let window, _, _, _, _) where window.isClamped: .warning
        default: .notice
        }
    }

    /// The line the operator reads.
    var message: String {
        switch self {
        case .recovering(let window, let environment, let passOne, let shard, let dryRun):
            let part = passOne.map { ", shard \(shard) (pass 1: \($0.start.formatted(.iso8601)) to \($0.end.formatted(.iso8601)))" } ?? ""
            let clamped = window.isClamped
                ? "\nwarning: --start \(window.requestedStart.formatted(.iso8601)) is before, or within the hour before, what \(environment.rawValue) history keeps "
                    + "(\(OutageWindow.retentionDays(environment)) days); the window starts at \(window.start.formatted(.iso8601)), since what was signed before it "
                    + "leaves Apple's history while the run pages"
                : ""
            return "Recovering \(window.start.formatted(.iso8601)) to \(window.end.formatted(.iso8601)) (\(environment))\(part)"
                + (dryRun ? ", dry run: nothing will be written" : "") + clamped
        case .resumingUnfinishedNightlyWindow:
            return "An unfinished nightly run of this window left checkpoints: resuming its window"
        case .abandonedDeadRuns(let count):
            return "\(count) earlier run(s) recorded as running had died; marked abandoned"
        case .resumed(let resumed):
            return "Resumed an unfinished run: \(resumed.notificationsHandledBefore) notification(s) it had handled were not fetched again"
                + (resumed.passOneDoneBefore ? "; its pass 1 was complete" : "")
        case .waitingForShards(let shards):
            return "waiting for shards \(shards.joined(separator: ", ")) to finish pass 1 before pass 2"
        case .shardWaitExpired(let shards, let waited):
            return "warning: shards \(shards.joined(separator: ", ")) have not finished pass 1 after \(waited.components.seconds) s; repairing without them (a later run catches up)"
        case .redelivering(let target, let pending):
            return "Re-delivering \(pending) notification(s) to \(target), in signedDate order"
        case .redeliveryBusy(let target):
            return "warning: another process is delivering to \(target); what this run recorded stays pending for it (or the next run, or deliver --to)"
        case .metricsNotWritten(let path, let error):
            return "warning: could not write the metrics file \(path): \(error)"
        }
    }
}

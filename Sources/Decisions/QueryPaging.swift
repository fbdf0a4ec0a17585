package import Foundation
package import LedgerModel

/// One history query's paging decisions in pass 1, as a machine: where it starts (a checkpoint
/// an earlier run left), the checkpoint each page writes, and what Apple refusing a pagination
/// token means. `NotificationRecovery` pages and writes; this decides. (The run's window moving
/// past Apple's retention limit is the run's decision: `RetentionMoves`.)
package struct QueryPaging: Sendable, Equatable {
    package enum Action: Equatable, Sendable {
        /// Page the query from `token` (nil: its first page), whose first page is the query's
        /// notification number `position`; `skipHandled`: what this process already handled in
        /// the query is skipped, by notificationUUID (after a restart).
        case fetch(token: String?, position: Int, skipHandled: Bool)
        /// The query is done (a checkpoint says so, or its pages ended).
        case done
        /// Apple's refusal stands: the run fails with it.
        case fail
    }

    /// How often one query may start over after its pagination token expired or was refused.
    package static let maximumRestarts = 3

    package let query: String
    /// The query's notifications handled so far, an earlier run's included: a count for the
    /// report, never a place to skip to (Apple's order is not documented as stable).
    package private(set) var handled: Int
    private var token: String?
    private var completed: Bool
    private var restarts = 0
    /// A page left payloads for a later try: the query's checkpoints are held back for good
    /// (restarts included), so that a run that dies before that try fetches them again.
    package private(set) var checkpointsHeld = false

    package init(query: String, saved: QueryCheckpoint?) {
        self.query = query
        self.handled = saved?.position ?? 0
        self.token = saved?.paginationToken
        self.completed = saved?.completed ?? false
    }

    package func start() -> Action {
        completed ? .done : .fetch(token: token, position: token == nil ? 0 : handled, skipHandled: false)
    }

    /// The checkpoint written with a page of `items` notifications in the same database
    /// transaction: Apple's token for the page after it (none: the query is complete).
    package func checkpoint(afterPageOf items: Int, resumeToken: String?) -> QueryCheckpoint? {
        guard !checkpointsHeld else { return nil }
        return QueryCheckpoint(query: query, position: handled + items, paginationToken: resumeToken, completed: resumeToken == nil)
    }

    /// A page was written; `leftForLater`: some of its payloads could not be verified now.
    package mutating func pageWritten(items: Int, leftForLater: Bool) {
        handled += items
        checkpointsHeld = checkpointsHeld || leftForLater
    }

    /// Apple refused the pagination token (expired or invalid): the query starts over from its
    /// first page, a few times at most.
    package mutating func tokenRefused() -> Action {
        guard restarts < Self.maximumRestarts else { return .fail }
        restarts += 1
        return restart()
    }

    /// The run moved its window's start: the query starts over from it.
    package mutating func windowStartMoved() -> Action { restart() }

    private mutating func restart() -> Action {
        token = nil
        return .fetch(token: nil, position: 0, skipHandled: true)
    }
}

/// The run's window start moving past Apple's retention limit (StartDateTooFarInPastError while
/// it pages): a few moves at most, each further on. Apple refusing again right after one means
/// its clock (or its retention) and this machine's disagree by more than the margin, which moving
/// on would never mend.
package struct RetentionMoves: Sendable, Equatable {
    package static let maximum = 3
    package private(set) var count = 0
    /// Where the queries start from now on.
    package private(set) var startMovedTo: Date?

    package init() {}

    /// Whether the window may start at `moved` (Apple's limit as it is now, plus the margin);
    /// nil when the window's start cannot move.
    package mutating func move(to moved: Date?) -> Bool {
        guard count < Self.maximum, let moved, startMovedTo.map({ $0 < moved }) ?? true else { return false }
        count += 1
        startMovedTo = moved
        return true
    }
}

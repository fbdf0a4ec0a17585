import Decisions
import Foundation
import LedgerModel
import Testing

/// Pass 1's paging decisions for one history query, without Apple or a database: where it
/// starts, the checkpoint each page writes, what a refused token or a moved window means.
@Suite struct QueryPagingTests {
    @Test func aQueryAnEarlierRunCompletedIsNotAskedAgain() {
        let paging = QueryPaging(query: "q", saved: QueryCheckpoint(query: "q", position: 40, paginationToken: nil, completed: true))
        #expect(paging.start() == .done)
    }

    @Test func aQueryResumesFromTheTokenAnEarlierRunCommittedAndCountsOnFromItsPosition() {
        var paging = QueryPaging(query: "q", saved: QueryCheckpoint(query: "q", position: 40, paginationToken: "t-3", completed: false))
        #expect(paging.start() == .fetch(token: "t-3", position: 40, skipHandled: false))
        #expect(paging.checkpoint(afterPageOf: 20, resumeToken: "t-4") == QueryCheckpoint(query: "q", position: 60, paginationToken: "t-4", completed: false))
        paging.pageWritten(items: 20, leftForLater: false)
        #expect(paging.checkpoint(afterPageOf: 5, resumeToken: nil) == QueryCheckpoint(query: "q", position: 65, paginationToken: nil, completed: true))
    }

    @Test func aFreshQueryStartsAtItsFirstPage() {
        #expect(QueryPaging(query: "q", saved: nil).start() == .fetch(token: nil, position: 0, skipHandled: false))
    }

    /// A page whose payloads wait for a later try (an OCSP responder out of reach) holds the
    /// query's checkpoints back for good, so that a run that dies before that try fetches them again.
    @Test func aPageLeftForALaterTryHoldsEveryLaterCheckpointBack() {
        var paging = QueryPaging(query: "q", saved: nil)
        paging.pageWritten(items: 10, leftForLater: true)
        #expect(paging.checkpoint(afterPageOf: 10, resumeToken: "t") == nil)
        paging.pageWritten(items: 10, leftForLater: false)
        _ = paging.tokenRefused()
        #expect(paging.checkpoint(afterPageOf: 10, resumeToken: nil) == nil, "held across a restart too")
        #expect(paging.handled == 20)
    }

    /// A refused token starts the query over from its first page, skipping what was handled,
    /// three times at most; then the refusal stands.
    @Test func aRefusedTokenRestartsTheQueryThreeTimesThenFails() {
        var paging = QueryPaging(query: "q", saved: QueryCheckpoint(query: "q", position: 40, paginationToken: "t", completed: false))
        for _ in 0..<QueryPaging.maximumRestarts {
            let outcome1 = paging.tokenRefused()
            #expect(outcome1 == .fetch(token: nil, position: 0, skipHandled: true))
        }
        let outcome2 = paging.tokenRefused()
        #expect(outcome2 == .fail)
        #expect(paging.handled == 40, "the count goes on: it is the report's, not a place to skip to")
    }

    @Test func theWindowStartMovesAFewTimesAtMostAndOnlyForward() {
        var moves = RetentionMoves()
        let day = Date(timeIntervalSince1970: 1_790_000_000)
        let offsets: [TimeInterval?] = [nil, 0, 0, 60, 120, 180]
        let allowed = offsets.map { offset in moves.move(to: offset.map { day.addingTimeInterval($0) }) }
        // A window whose start cannot move; the first move; not to the same start again; two more;
        // three moves at most.
        #expect(allowed == [false, true, false, true, true, false])
        #expect(moves.startMovedTo == day.addingTimeInterval(120))
    }

    @Test func aMovedWindowRestartsTheQueryWithoutSpendingARestart() {
        var paging = QueryPaging(query: "q", saved: nil)
        let outcome9 = paging.windowStartMoved()
        #expect(outcome9 == .fetch(token: nil, position: 0, skipHandled: true))
        for _ in 0..<QueryPaging.maximumRestarts { _ = paging.tokenRefused() }
        let outcome10 = paging.tokenRefused()
        #expect(outcome10 == .fail)
    }
}

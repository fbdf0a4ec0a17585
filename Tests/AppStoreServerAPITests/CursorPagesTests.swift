import AppStoreServerAPI
import Synchronization
import Testing

/// Both paged endpoints walk their pages through one `CursorPages`: these tests drive it with a
/// fetch of canned answers, no server.
@Suite("Paging by cursor")
struct CursorPagesTests {
    /// A canned endpoint: page i names cursor "c<i+1>" while more follow; records each cursor asked for.
    final class Pager: Sendable {
        let asked = Mutex<[String?]>([])
        let pages: Int
        let dropCursorOnPage: Int?
        init(pages: Int, dropCursorOnPage: Int? = nil) {
            self.pages = pages
            self.dropCursorOnPage = dropCursorOnPage
        }

        func fetch(_ cursor: String?) -> (page: Int, hasMore: Bool, nextCursor: String?) {
            asked.withLock { $0.append(cursor) }
            let index = cursor.flatMap { Int($0.dropFirst()) } ?? 0
            let hasMore = index + 1 < pages
            let next = hasMore && index != dropCursorOnPage ? "c\(index + 1)" : nil
            return (index, hasMore, next)
        }
    }

    @Test func everyPageIsFetchedOnceInOrderAndTheWalkEndsAtTheLastPage() async throws {
        let pager = Pager(pages: 4)
        var seen: [Int] = []
        for try await page in CursorPages(firstCursor: nil, endpoint: .transactionHistory, cursorName: "revision", fetch: { pager.fetch($0) }) {
            seen.append(page)
        }
        #expect(seen == [0, 1, 2, 3])
        #expect(pager.asked.withLock { $0 } == [nil, "c1", "c2", "c3"])
    }

    @Test func aStoredCursorResumesAfterThePagesAlreadyProcessed() async throws {
        let pager = Pager(pages: 4)
        var seen: [Int] = []
        for try await page in CursorPages(firstCursor: "c2", endpoint: .notificationHistory, cursorName: "paginationToken", fetch: { pager.fetch($0) }) {
            seen.append(page)
        }
        #expect(seen == [2, 3])
    }

    /// Get Transaction History's revision is its cursor too: a page with more to come but no
    /// revision must stop the walk with an error, not start again from the first page forever.
    @Test func aPageWithMoreButNoCursorIsAnErrorNamingTheCursorNotARestart() async throws {
        let pager = Pager(pages: 5, dropCursorOnPage: 1)
        var seen: [Int] = []
        var failure: AppStoreTransportError?
        do {
            for try await page in CursorPages(firstCursor: nil, endpoint: .transactionHistory, cursorName: "revision", fetch: { pager.fetch($0) }) {
                seen.append(page)
            }
        } catch let error as AppStoreTransportError {
            failure = error
        }
        #expect(seen == [0])
        #expect(pager.asked.withLock { $0.count } == 2)
        #expect(failure?.description.contains("hasMore but carried no revision") == true)
        #expect(failure?.isRetryable == false)
    }
}

import SignedData

/// The pages of one paged query, in order, each fetched when the caller asks for it: the caller
/// sets the pace and can checkpoint between pages. Both of Apple's paged endpoints work this way,
/// with a different cursor (Get Notification History's `paginationToken`, Get Transaction
/// History's `revision`): `fetch` takes the cursor (nil for the first page, or a stored one) and
/// returns the page and the cursor of the next one, nil after the last. A page that says it has
/// more but names no cursor is an error, never a silent restart from the first page.
public struct CursorPages<Page: Sendable>: AsyncSequence, Sendable {
    public typealias Element = Page

    let firstCursor: String?
    let endpoint: Endpoint
    /// The cursor's name in Apple's answer, for the error.
    let cursorName: String
    let fetch: @Sendable (_ cursor: String?) async throws -> (page: Page, hasMore: Bool, nextCursor: String?)

    package init(
        firstCursor: String?, endpoint: Endpoint, cursorName: String,
        fetch: @escaping @Sendable (_ cursor: String?) async throws -> (page: Page, hasMore: Bool, nextCursor: String?)
    ) {
        self.firstCursor = firstCursor
        self.endpoint = endpoint
        self.cursorName = cursorName
        self.fetch = fetch
    }

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let endpoint: Endpoint
        let cursorName: String
        let fetch: @Sendable (_ cursor: String?) async throws -> (page: Page, hasMore: Bool, nextCursor: String?)
        var cursor: String?
        var finished = false

        public mutating func next() async throws -> Page? {
            guard !finished else { return nil }
            let answer = try await fetch(cursor)
            guard answer.hasMore else {
                finished = true
                return answer.page
            }
            guard let next = answer.nextCursor, !next.isEmpty else {
                finished = true
                throw AppStoreTransportError(
                    endpoint: endpoint, description: "a page said hasMore but carried no \(cursorName)", isRetryable: false
                )
            }
            cursor = next
            return answer.page
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(endpoint: endpoint, cursorName: cursorName, fetch: fetch, cursor: firstCursor)
    }
}

/// The pages of one Get Notification History query; the body is the same on every page.
public typealias NotificationHistoryPages = CursorPages<NotificationHistoryPage>

/// The pages of one customer's Get Transaction History. The last page (hasMore false) carries the
/// revision to store: the next fetch starting from it returns only what changed.
public typealias TransactionHistoryPages = CursorPages<HistoryResponse>

/// A page of notification history and the token that fetched it (nil for the first page).
public struct NotificationHistoryPage: Hashable, Sendable {
    public var response: NotificationHistoryResponse
    public var requestedWith: String?

    /// The token to resume after this page, when there are more.
    public var resumeToken: String? { response.hasMore ? response.paginationToken : nil }
}

extension HistoryResponse {
    /// The revision to store once everything up to here is committed; nil while more pages follow.
    public var finalRevision: String? { hasMore ? nil : revision }
}

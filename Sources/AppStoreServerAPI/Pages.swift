import SignedData

/// The pages of one Get Notification History query, in order. Each page is fetched when asked
/// for, so the caller sets the pace and can checkpoint `paginationToken` between pages. Ends
/// after the page whose `hasMore` is false; a page that claims more without a token is an error.
public struct NotificationHistoryPages: AsyncSequence, Sendable {
    public typealias Element = NotificationHistoryPage

    let client: AppStoreServerAPIClient
    let request: NotificationHistoryRequest
    let firstToken: String?

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let client: AppStoreServerAPIClient
        let request: NotificationHistoryRequest
        var token: String?
        var finished = false

        public mutating func next() async throws -> NotificationHistoryPage? {
            guard !finished else { return nil }
            let response = try await client.notificationHistoryPage(request, paginationToken: token)
            let page = NotificationHistoryPage(response: response, requestedWith: token)
            if response.hasMore {
                guard let next = response.paginationToken, !next.isEmpty else {
                    finished = true
                    throw AppStoreTransportError(
                        endpoint: .notificationHistory, description: "a page said hasMore but carried no paginationToken", isRetryable: false
                    )
                }
                token = next
            } else {
                finished = true
            }
            return page
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(client: client, request: request, token: firstToken)
    }
}

/// A page of notification history and the token that fetched it (nil for the first page).
public struct NotificationHistoryPage: Hashable, Sendable {
    public var response: NotificationHistoryResponse
    public var requestedWith: String?

    /// The token to resume after this page, when there are more.
    public var resumeToken: String? { response.hasMore ? response.paginationToken : nil }
}

/// The pages of one customer's Get Transaction History, in order. The last page (hasMore false)
/// carries the revision to store: the next fetch starting from it returns only what changed.
public struct TransactionHistoryPages: AsyncSequence, Sendable {
    public typealias Element = HistoryResponse

    let client: AppStoreServerAPIClient
    let transactionId: String
    let query: TransactionHistoryQuery
    let firstRevision: String?

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let client: AppStoreServerAPIClient
        let transactionId: String
        let query: TransactionHistoryQuery
        var revision: String?
        var finished = false

        public mutating func next() async throws -> HistoryResponse? {
            guard !finished else { return nil }
            let page = try await client.transactionHistoryPage(transactionId: transactionId, query: query, revision: revision)
            revision = page.revision
            finished = !page.hasMore
            return page
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(client: client, transactionId: transactionId, query: query, revision: firstRevision)
    }
}

extension HistoryResponse {
    /// The revision to store once everything up to here is committed; nil while more pages follow.
    public var finalRevision: String? { hasMore ? nil : revision }
}

public import SignedData

/// The body of Get Notification History (`NotificationHistoryRequest`). Optional fields that are
/// nil are omitted, never sent as empty strings (Apple answers an empty `transactionId` with
/// InvalidTransactionIdError). The identical body must accompany every page of one query.
public struct NotificationHistoryRequest: Hashable, Sendable, Codable {
    /// UNIX milliseconds; must precede `endDate` and lie within the history's retention.
    public var startDate: UnixMilliseconds
    /// UNIX milliseconds; a future value means now.
    public var endDate: UnixMilliseconds
    public var notificationType: NotificationType?
    /// Requires `notificationType`. Without a subtype, a type filter matches only
    /// notifications that have no subtype.
    public var notificationSubtype: NotificationSubtype?
    /// Limits to one customer; not together with `notificationType`.
    public var transactionId: String?
    /// Only notifications that never reached the server (including ones still being retried).
    public var onlyFailures: Bool?

    public init(
        startDate: UnixMilliseconds, endDate: UnixMilliseconds, notificationType: NotificationType? = nil,
        notificationSubtype: NotificationSubtype? = nil, transactionId: String? = nil, onlyFailures: Bool? = nil
    ) {
        self.startDate = startDate
        self.endDate = endDate
        self.notificationType = notificationType
        self.notificationSubtype = notificationSubtype
        self.transactionId = transactionId
        self.onlyFailures = onlyFailures
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(startDate, forKey: .startDate)
        try container.encode(endDate, forKey: .endDate)
        if let notificationType, !notificationType.rawValue.isEmpty { try container.encode(notificationType, forKey: .notificationType) }
        if let notificationSubtype, !notificationSubtype.rawValue.isEmpty { try container.encode(notificationSubtype, forKey: .notificationSubtype) }
        if let transactionId, !transactionId.isEmpty { try container.encode(transactionId, forKey: .transactionId) }
        if let onlyFailures { try container.encode(onlyFailures, forKey: .onlyFailures) }
    }
}

/// One page of Get Notification History (`NotificationHistoryResponse`).
public struct NotificationHistoryResponse: Hashable, Sendable, Codable {
    public var notificationHistory: [NotificationHistoryItem]
    public var hasMore: Bool
    public var paginationToken: String?

    public init(notificationHistory: [NotificationHistoryItem], hasMore: Bool, paginationToken: String?) {
        self.notificationHistory = notificationHistory
        self.hasMore = hasMore
        self.paginationToken = paginationToken
    }
}

/// A notification as history keeps it: the original signed payload and every delivery attempt.
public struct NotificationHistoryItem: Hashable, Sendable, Codable {
    public var signedPayload: String
    /// At most six: the first attempt and up to five retries (production only).
    public var sendAttempts: [SendAttempt]?
    /// Deprecated by Apple in favour of the earliest `sendAttempts` entry.
    public var firstSendAttemptResult: SendAttemptResult?

    public init(signedPayload: String, sendAttempts: [SendAttempt]?, firstSendAttemptResult: SendAttemptResult? = nil) {
        self.signedPayload = signedPayload
        self.sendAttempts = sendAttempts
        self.firstSendAttemptResult = firstSendAttemptResult
    }

    /// The result of the first delivery attempt: the earliest `sendAttempts` entry, else the
    /// deprecated field.
    public var firstAttemptResult: SendAttemptResult? {
        sendAttempts?.min(by: { $0.attemptDate < $1.attemptDate })?.sendAttemptResult ?? firstSendAttemptResult
    }
}

public struct SendAttempt: Hashable, Sendable, Codable {
    public var attemptDate: UnixMilliseconds
    public var sendAttemptResult: SendAttemptResult

    public init(attemptDate: UnixMilliseconds, sendAttemptResult: SendAttemptResult) {
        self.attemptDate = attemptDate
        self.sendAttemptResult = sendAttemptResult
    }
}

/// Why a delivery attempt succeeded or failed. Unknown values keep their raw string.
public struct SendAttemptResult: ExtensibleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let success: Self = "SUCCESS"
    public static let timedOut: Self = "TIMED_OUT"
    public static let tlsIssue: Self = "TLS_ISSUE"
    public static let circularRedirect: Self = "CIRCULAR_REDIRECT"
    public static let noResponse: Self = "NO_RESPONSE"
    public static let socketIssue: Self = "SOCKET_ISSUE"
    public static let unsupportedCharset: Self = "UNSUPPORTED_CHARSET"
    public static let invalidResponse: Self = "INVALID_RESPONSE"
    public static let prematureClose: Self = "PREMATURE_CLOSE"
    public static let unsuccessfulHTTPResponseCode: Self = "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
    public static let other: Self = "OTHER"
    /// Replaced by TLS_ISSUE in API 1.6; old records may still carry it.
    public static let sslIssue: Self = "SSL_ISSUE"
}

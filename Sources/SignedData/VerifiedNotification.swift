/// A notification whose signed payload and every nested signed payload verified.
public struct VerifiedNotification: Hashable, Sendable {
    public var payload: NotificationPayload
    /// `data.signedTransactionInfo`, decoded; nil when the notification has none.
    public var transaction: TransactionPayload?
    /// `data.signedRenewalInfo`, decoded; auto-renewable subscriptions only.
    public var renewalInfo: RenewalInfoPayload?
    /// `appData.signedAppTransactionInfo`, decoded; `RESCIND_CONSENT` only.
    public var appTransaction: AppTransactionPayload?
    /// The part that named the app when none of the four known parts did (`NotificationOtherPart`).
    public var otherPart: NotificationOtherPart?

    public init(
        payload: NotificationPayload, transaction: TransactionPayload? = nil,
        renewalInfo: RenewalInfoPayload? = nil, appTransaction: AppTransactionPayload? = nil
    ) {
        self.payload = payload
        self.transaction = transaction
        self.renewalInfo = renewalInfo
        self.appTransaction = appTransaction
    }

    /// Whom it is about: the known part's identity, else the other part's (the one checked).
    public var identity: NotificationIdentity? { payload.identity ?? otherPart?.identity }

    /// The subscription it is about: its transaction's, its renewal info's, or its other part's.
    public var originalTransactionId: String? {
        transaction?.originalTransactionId ?? renewalInfo?.originalTransactionId ?? otherPart?.originalTransactionId
    }
}

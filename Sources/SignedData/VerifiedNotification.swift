/// A notification whose signed payload and every nested signed payload verified.
public struct VerifiedNotification: Hashable, Sendable {
    public var payload: NotificationPayload
    /// `data.signedTransactionInfo`, decoded; nil when the notification has none.
    public var transaction: TransactionPayload?
    /// `data.signedRenewalInfo`, decoded; auto-renewable subscriptions only.
    public var renewalInfo: RenewalInfoPayload?
    /// `appData.signedAppTransactionInfo`, decoded; `RESCIND_CONSENT` only.
    public var appTransaction: AppTransactionPayload?

    public init(
        payload: NotificationPayload, transaction: TransactionPayload? = nil,
        renewalInfo: RenewalInfoPayload? = nil, appTransaction: AppTransactionPayload? = nil
    ) {
        self.payload = payload
        self.transaction = transaction
        self.renewalInfo = renewalInfo
        self.appTransaction = appTransaction
    }
}

import Foundation

/// A look at a JWS payload *without* verifying it: for telling what kind of payload an operator
/// handed in, and for naming a rejected notification (its `notificationUUID`) in reports.
/// Nothing read here may be applied.
public enum UnverifiedPayload {
    /// The payload's top-level JSON object, or nil if it has none.
    public static func fields(of jws: String) -> [String: JSONValue]? {
        // CompactJWS finds the dots in the bytes; splitting by Character would walk grapheme
        // clusters through kilobytes of base64, the costliest step of a page.
        guard let parts = CompactJWS(jws), let bytes = Base64URL.decode(parts.payload) else { return nil }
        return try? JSONDecoder().decode([String: JSONValue].self, from: Data(bytes))
    }

    /// The kind of signed payload, judged by its fields.
    public static func kind(of jws: String) -> SignedPayloadKind? {
        guard let fields = fields(of: jws) else { return nil }
        if fields["notificationUUID"] != nil || fields["notificationType"] != nil { return .notification }
        if fields["transactionId"] != nil { return .transaction }
        if fields["receiptType"] != nil || fields["receiptCreationDate"] != nil { return .appTransaction }
        if fields["autoRenewStatus"] != nil || fields["autoRenewProductId"] != nil || fields["originalTransactionId"] != nil {
            return .renewalInfo
        }
        return nil
    }

    /// The customer a notification names in its (unverified) nested transaction: only for
    /// choosing whom to ask Apple about, never for applying anything.
    public static func originalTransactionId(ofNotification jws: String) -> String? {
        guard case .object(let data)? = fields(of: jws)?["data"], case .string(let transaction)? = data["signedTransactionInfo"],
            case .string(let id)? = fields(of: transaction)?["originalTransactionId"]
        else { return nil }
        return String(id.prefix(64))
    }

    /// `notificationUUID` when the payload is readable and has one.
    public static func notificationUUID(of jws: String) -> String? {
        if case .string(let uuid) = fields(of: jws)?["notificationUUID"] { return String(uuid.prefix(64)) }
        return nil
    }
}

/// The kinds of signed payload Apple sends.
public enum SignedPayloadKind: String, Sendable, CaseIterable, Codable {
    case notification
    case transaction
    case renewalInfo = "renewal-info"
    case appTransaction = "app-transaction"
}

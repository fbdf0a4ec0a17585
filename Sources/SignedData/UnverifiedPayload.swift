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
        // Pass 1 reads every notification of an unfiltered query this way (to skip those a
        // priority query fetched): the plain shape goes by the fast path, anything else by
        // JSONDecoder, which then decides.
        if let fields = SimpleJSONObject.parse(bytes)?.jsonFields { return fields }
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

    /// What an unverified notification names, for reports and repairs only.
    public struct NotificationNames: Sendable, Hashable {
        public var notificationUUID: String?
        /// The customer its nested transaction names.
        public var originalTransactionId: String?
    }

    /// The largest payload `names(ofNotification:)` reads: Apple's are a few tens of kilobytes,
    /// and decoding a crafted one (a JSON object of many thousand keys) costs CPU per byte.
    public static let namesReadLimit = 64 * 1024

    /// `notificationUUID` and the customer of a notification nobody verified, read with one
    /// decode of its payload (and one of its nested transaction); nothing over `namesReadLimit`.
    public static func names(ofNotification jws: String) -> NotificationNames {
        guard jws.utf8.count <= namesReadLimit, let fields = fields(of: jws) else { return NotificationNames() }
        var names = NotificationNames()
        if case .string(let uuid)? = fields["notificationUUID"] { names.notificationUUID = String(uuid.prefix(64)) }
        if case .object(let data)? = fields["data"], case .string(let transaction)? = data["signedTransactionInfo"],
            case .string(let id)? = Self.fields(of: transaction)?["originalTransactionId"]
        {
            names.originalTransactionId = String(id.prefix(64))
        }
        return names
    }

    /// The App Store a notification *claims* to be of, read without verifying it: only for
    /// choosing which app's verifier verifies it (`serve` with several apps), which then checks
    /// the same fields again after the signature. Not capped at `namesReadLimit`: a genuine
    /// notification of any size its verifier takes must reach its own verifier; the caller bounds
    /// the input (serve's body limit), and the verifier decodes the same bytes again anyway.
    /// nil when unreadable or naming no app and environment.
    public static func claimedPair(ofNotification jws: String) -> AppStorePair? {
        guard let parts = CompactJWS(jws), let bytes = Base64URL.decode(parts.payload) else { return nil }
        let payload = NotificationPayload.decodeFast(bytes) ?? (try? JSONDecoder().decode(NotificationPayload.self, from: Data(bytes)))
        return payload?.identity?.pair
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

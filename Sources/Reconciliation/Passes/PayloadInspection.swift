import Foundation
package import SignedData

/// What `appstore-reconcile verify` does, as a library call: accept what an operator has at
/// hand (a bare JWS, Apple's webhook body `{"signedPayload": …}`, or a Get Notification History
/// item), verify it, and describe the result as JSON with nested signed payloads decoded in place.
package struct PayloadInspection: Sendable {
    package enum Verdict: String, Sendable, Codable {
        case verified
        case rejected
        case retryLater = "retry-later"
    }

    package var kind: SignedPayloadKind
    package var verdict: Verdict
    package var rejection: Rejection?
    package var retryReason: String?
    /// The decoded payload: verified when the verdict is `verified`, for information only otherwise.
    package var payload: JSONValue?

    /// Extracts the JWS from any of the accepted input forms, as `serve` does
    /// (`NotificationBody`): a repeated key or a NUL is malformed input.
    package static func signedPayload(fromInput text: String) throws -> String {
        try signedPayload(fromInput: Array(text.utf8))
    }

    package static func signedPayload(fromInput bytes: [UInt8]) throws -> String {
        switch NotificationBody.signedPayload(fromInput: bytes) {
        case .success(let jws): return jws
        case .failure(let refusal): throw InspectionInputError(description: refusal.description)
        }
    }

    /// Verifies `jws` as `kind` (judged from its fields when nil).
    package static func inspect(_ jws: String, kind: SignedPayloadKind?, verifier: SignedDataVerifier) async -> PayloadInspection {
        let kind = kind ?? UnverifiedPayload.kind(of: jws) ?? .notification
        let unverified = UnverifiedPayload.fields(of: jws).map { JSONValue.object($0) }
        switch kind {
        case .notification:
            return make(kind, await verifier.verifyNotification(jws), unverified) { notification in
                expand(notification)
            }
        case .transaction:
            return make(kind, await verifier.verifyTransaction(jws), unverified) { json($0) }
        case .renewalInfo:
            return make(kind, await verifier.verifyRenewalInfo(jws), unverified) { json($0) }
        case .appTransaction:
            return make(kind, await verifier.verifyAppTransaction(jws), unverified) { json($0) }
        }
    }

    private static func make<Payload>(
        _ kind: SignedPayloadKind, _ outcome: VerificationOutcome<Payload>, _ unverified: JSONValue?,
        _ render: (Payload) -> JSONValue?
    ) -> PayloadInspection {
        switch outcome {
        case .verified(let payload):
            PayloadInspection(kind: kind, verdict: .verified, payload: render(payload))
        case .rejected(let rejection):
            PayloadInspection(kind: kind, verdict: .rejected, rejection: rejection, payload: unverified)
        case .retryLater(let reason):
            PayloadInspection(kind: kind, verdict: .retryLater, retryReason: reason, payload: unverified)
        }
    }

    /// The notification with its signed transaction, renewal info and app transaction replaced
    /// by their decoded (and verified) contents.
    private static func expand(_ notification: VerifiedNotification) -> JSONValue? {
        guard case .object(var top)? = json(notification.payload) else { return nil }
        if case .object(var data)? = top["data"] {
            if let transaction = notification.transaction { data["signedTransactionInfo"] = json(transaction) }
            if let renewalInfo = notification.renewalInfo { data["signedRenewalInfo"] = json(renewalInfo) }
            top["data"] = .object(data)
        }
        if case .object(var appData)? = top["appData"], let appTransaction = notification.appTransaction {
            appData["signedAppTransactionInfo"] = json(appTransaction)
            top["appData"] = .object(appData)
        }
        return .object(top)
    }

    private static func json(_ value: some Encodable) -> JSONValue? {
        guard let data = try? JSONEncoder().encode(value) else { return nil }
        return try? JSONDecoder().decode(JSONValue.self, from: data)
    }

    /// The whole result as pretty JSON for people and scripts.
    package func renderedJSON() -> String {
        var object: [String: JSONValue] = ["kind": .string(kind.rawValue), "verdict": .string(verdict.rawValue)]
        if let rejection {
            object["reason"] = .string(rejection.reason.rawValue)
            object["detail"] = .string(rejection.detail)
        }
        if let retryReason { object["retryReason"] = .string(retryReason) }
        if let payload { object[verdict == .verified ? "payload" : "unverifiedPayload"] = payload }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(JSONValue.object(object)), as: UTF8.self)) ?? "{}"
    }

    /// One line a person understands.
    package var summaryLine: String {
        switch verdict {
        case .verified: "verified: the \(kind.rawValue) is signed through a configured root certificate and is for this app and environment"
        case .rejected:
            "rejected (\(rejection!.reason.rawValue)): \(rejection!.reason.explanation); \(rejection!.detail)"
        case .retryLater: "not verified yet, retry later: \(retryReason ?? "")"
        }
    }
}

package struct InspectionInputError: Error, CustomStringConvertible, Sendable {
    package var description: String
}

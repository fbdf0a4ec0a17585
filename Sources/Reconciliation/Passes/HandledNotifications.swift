import AppStoreServerAPI
import Crypto
import Decisions
import Foundation
import SignedData

/// The notifications one query of pass 1 has handled in this process, by `notificationUUID`
/// (a payload that names none, by the digest of its bytes): what a query that starts over after
/// Apple refused its pagination token skips. Apple's order is not documented as stable, and with
/// `--only-failures` a notification delivered on a retry leaves the list between two attempts,
/// so every position after it shifts: skipping the first N items of the new attempt would skip a
/// notification never handled, and the next nightly's window may not reach back to it.
struct HandledNotifications: Sendable {
    private var uuids: Set<UUID> = []
    private var digests: Set<SHA256Digest> = []

    var count: Int { uuids.count + digests.count }

    /// Records a page's items as handled, by what their verification (or, unverified, their
    /// content) named.
    mutating func insert(_ inputs: [RecoveryPlanner.Input]) {
        for input in inputs {
            let named = input.outcome.verifiedPayload?.payload.notificationUUID ?? input.unverifiedNames?.notificationUUID
            if let uuid = named.flatMap(UUID.init(uuidString:)) {
                uuids.insert(uuid)
            } else {
                digests.insert(SHA256.hash(data: Array(input.item.signedPayload.utf8)))
            }
        }
    }

    /// Whether `item` is one handled already (its `notificationUUID` read without verifying:
    /// only for skipping, never for applying).
    func contains(_ item: NotificationHistoryItem) -> Bool {
        if case .string(let text)? = UnverifiedPayload.fields(of: item.signedPayload)?["notificationUUID"], let uuid = UUID(uuidString: text),
            uuids.contains(uuid)
        {
            return true
        }
        // One too large to name its UUID where it was handled was recorded by its bytes.
        return !digests.isEmpty && digests.contains(SHA256.hash(data: Array(item.signedPayload.utf8)))
    }
}

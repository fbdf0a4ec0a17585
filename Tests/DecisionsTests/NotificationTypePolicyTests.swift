import Decisions
import Foundation
import LedgerModel
import SignedData
import Testing

/// `NotificationTypePolicy`, the one table of what the tool does with each of Apple's types.
@Suite("the notification-type policy")
struct NotificationTypePolicyTests {
    @Test func everyTypeAppleDocumentsHasARowAndTheTableNoOther() {
        for type in NotificationType.documented {
            #expect(NotificationTypePolicy.table[type] != nil, "\(type.rawValue) has no row")
        }
        #expect(Set(NotificationTypePolicy.table.keys) == Set(NotificationType.documented))
        #expect(NotificationType(rawValue: "SOMETHING_NEW").policy == .unknown)
    }

    /// The lists the table replaced (issue 49, point 4), kept as they were: pass 1's priority
    /// queries in their order, the types needing the transaction history, the refund flow, the
    /// lapse explanations, the refund episode's roles and the deadline.
    @Test func theListsItReplacedAreUnchanged() {
        #expect(NotificationTypePolicy.types(\.priorityInPassOne) == [.didRenew, .expired, .consumptionRequest])
        #expect(
            Set(NotificationTypePolicy.types(\.needsTransactionHistory))
                == [.refund, .refundReversed, .refundDeclined, .consumptionRequest, .revoke, .oneTimeCharge])
        #expect(Set(NotificationTypePolicy.types(\.refundFlow)) == [.refund, .refundReversed, .refundDeclined, .consumptionRequest])
        #expect(Set(NotificationTypePolicy.types(\.explainsLapse)) == [.didFailToRenew, .expired, .gracePeriodExpired, .refund, .revoke])
        #expect(Set(NotificationTypePolicy.types { $0.refundEpisode == .decision }) == [.refund, .refundDeclined])
        #expect(NotificationTypePolicy.types { $0.refundEpisode == .request } == [.consumptionRequest])
        #expect(NotificationTypePolicy.types(\.carriesDeadline) == [.consumptionRequest])
        #expect(NotificationTypePolicy.recoveredTypes.refundFlow == NotificationTypePolicy.names(\.refundFlow))
    }

    @Test func accessDependsOnTheSubtypeWhereAppleSaysSo() {
        let pref = NotificationType.didChangeRenewalPref.policy
        #expect(pref.access(type: .didChangeRenewalPref, subtype: .upgrade) == .grants)
        #expect(pref.access(type: .didChangeRenewalPref, subtype: .downgrade) == .unchanged)
        let failed = NotificationType.didFailToRenew.policy
        #expect(failed.access(type: .didFailToRenew, subtype: .gracePeriod) == .unchanged)
        #expect(failed.access(type: .didFailToRenew, subtype: nil) == .withdraws)
        #expect(Set(NotificationTypePolicy.types { $0.access == .grants }).isSuperset(of: [.didRenew, .subscribed, .offerRedeemed, .refundReversed]))
        #expect(Set(NotificationTypePolicy.types { $0.access == .withdraws }).isSuperset(of: [.expired, .refund, .revoke, .gracePeriodExpired]))
    }

    /// No file of Sources spells a type's name as a string literal, Swift's or SQL's, but the type's
    /// own file (and the simulator, which plays Apple): every other file asks the table or uses the cases.
    @Test func noOtherSourceFileSpellsATypesName() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources")
        let names = NotificationType.documented.flatMap { ["\"\($0.rawValue)\"", "'\($0.rawValue)'"] }
        var spelled: [String] = []
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        for case let file as URL in files where file.pathExtension == "swift" {
            let path = file.path.replacingOccurrences(of: sources.path + "/", with: "")
            guard path != "SignedData/NotificationType.swift", !path.hasPrefix("AppStoreSimulator/") else { continue }
            let text = try String(contentsOf: file, encoding: .utf8)
            for name in names where text.contains(name) { spelled.append("\(path): \(name)") }
        }
        #expect(spelled.isEmpty, "\(spelled)")
        #expect(FileManager.default.fileExists(atPath: sources.appendingPathComponent("SignedData/NotificationType.swift").path))
    }
}

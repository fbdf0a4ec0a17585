import Decisions
import SignedData
import Testing

/// Issue 62, point 8: where an import asks about a line's IDs. Apple: call a transaction-ID
/// endpoint in the environment that created the ID, and on 4040010 try Sandbox; a receipt's type
/// (attribute 0) says which environment made it.
@Suite("Where an import asks Apple")
struct ImportRouteTests {
    static let production = AppStorePair(bundleId: "com.example.app", environment: .production)
    static let sandbox = AppStorePair(bundleId: "com.example.app", environment: .sandbox)

    @Test func aProductionImportAsksTheSandboxPairOnlyAfterProductionSaysItDoesNotKnowTheId() {
        let route = ImportLine.parse("2000000000000001", kind: .transactionIds, pair: Self.production, sandboxPair: true)
        #expect(route == .transactionIds(["2000000000000001"], .thisPair(orSandbox: true)))
        let asks = ImportRoute.thisPair(orSandbox: true)
        #expect(asks.asksSandbox(afterAnswer: "4040010"))
        #expect(asks.asksSandbox(afterAnswer: "4000006"), "Production's answer for a Sandbox ID in apple/app-store-server-library-node#129")
        #expect(!asks.asksSandbox(afterAnswer: "4040001"), "an account Apple does not know in Production is no Sandbox question")
        #expect(!asks.asksSandbox(afterAnswer: nil), "Apple silent: retried later, not elsewhere")
        #expect(!ImportRoute.thisPair(orSandbox: false).asksSandbox(afterAnswer: "4040010"), "no Sandbox pair configured")
        #expect(ImportLine.parse("2000000000000001", kind: .transactionIds, pair: Self.production) == .transactionIds(["2000000000000001"], .thisPair(orSandbox: false)))
    }

    @Test func aReceiptGoesWhereItsTypeSaysOrIsRefusedWithTheReason() {
        #expect(ImportRoute.forReceipt(type: "Production", pair: Self.production, sandboxPair: true) == .success(.thisPair(orSandbox: true)))
        #expect(ImportRoute.forReceipt(type: "ProductionSandbox", pair: Self.production, sandboxPair: true) == .success(.thisPair(orSandbox: true)))
        #expect(ImportRoute.forReceipt(type: "ProductionVPPSandbox", pair: Self.sandbox, sandboxPair: false) == .success(.thisPair(orSandbox: false)))
        #expect(ImportRoute.forReceipt(type: nil, pair: Self.sandbox, sandboxPair: false) == .success(.thisPair(orSandbox: false)))
        guard case .failure(let noSandbox) = ImportRoute.forReceipt(type: "ProductionSandbox", pair: Self.production, sandboxPair: false),
            case .failure(let xcode) = ImportRoute.forReceipt(type: "Xcode", pair: Self.production, sandboxPair: true),
            case .failure(let production) = ImportRoute.forReceipt(type: "Production", pair: Self.sandbox, sandboxPair: false),
            case .failure(let odd) = ImportRoute.forReceipt(type: "Simulator", pair: Self.production, sandboxPair: true)
        else {
            Issue.record("a Sandbox receipt without a Sandbox pair, an Xcode receipt, a Production receipt in Sandbox and an unknown type are refused")
            return
        }
        #expect(noSandbox.reason.contains("configure the app's Sandbox environment"))
        #expect(xcode.reason.contains("Xcode"))
        #expect(production.reason.contains("--environment Production"))
        #expect(odd.reason.contains("Simulator"))
    }
}

import AppStoreServerAPI
import Deployment
import LiveReceiver
import Reconciliation
import SignedData

extension ServeCommand {
    /// Every configured App Store's verifier (its app, its appAppleId in Production, its
    /// environment), and the receiver's settings with each one's forwarding target: --forward-to
    /// for all, else the pair's deliverTo, with --forward-header.
    func appStores(_ pairs: [Deployment.Pair]) throws -> (ReceiverSettings, [SignedDataVerifier]) {
        let online = onlineChecks ? OnlineChecks(transport: HTTPOCSPTransport()) : nil
        var settings = self.settings
        // One value for the whole file.
        settings.overdueAfter = pairs.first?.overdueAfter ?? Deployment.Pair.defaultOverdueAfter
        var verifiers: [SignedDataVerifier] = []
        for pair in pairs {
            verifiers.append(try pair.verifier(onlineChecks: online))
            settings.forwardTo[pair.pair] = try pair.deliveryTarget(given: forwardTo?.target, headers: forwardHeader)
        }
        if !forwardHeader.isEmpty && settings.forwardTo.isEmpty {
            throw ConfigurationError(setting: "--forward-header", problem: "needs --forward-to, or a deliverTo in the configuration file for a pair serve receives")
        }
        return (settings, verifiers)
    }

    /// What serve says once it listens: where, for which App Stores, forwarding where (scheme
    /// and host only: a URL may hold a credential).
    static func listeningLine(_ settings: ReceiverSettings, pairs: [AppStorePair]) -> @Sendable (Int) -> String {
        let stores = pairs.map(\.description).joined(separator: ", ")
        let targets = Set(settings.forwardTo.values.map(\.description)).sorted()
        let forwarding = targets.isEmpty ? "" : ", forwarding to \(targets.joined(separator: ", "))"
        return { port in "serve: listening on \(settings.host):\(port), POST \(settings.path) for \(stores)\(forwarding)" }
    }
}

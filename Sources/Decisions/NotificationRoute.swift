package import SignedData

/// Which of `serve`'s App Stores verifies and records a notification, when one listener receives
/// every configured app and environment. Chosen from the app and environment the payload claims
/// before it is verified; the chosen App Store's verifier then checks those fields again after
/// the signature, so a claim can choose a verifier but never a ledger.
package enum NotificationRoute: Hashable, Sendable {
    /// One of the configured App Stores.
    case pair(AppStorePair)
    /// An app or environment this deployment does not receive (or none could be read): verified
    /// only to tell Apple's payload from a forgery, then rejected (`rejection(unconfigured:…)`).
    case unconfigured(claimed: AppStorePair?)

    /// The route of a notification claiming `claimed`, among `configured` (in the configuration's
    /// order). With one App Store configured every notification is its own, so its verifier's
    /// reasons (wrong bundle, wrong environment) are the ones given, as before several apps.
    package static func choose(claimed: AppStorePair?, configured: [AppStorePair]) -> NotificationRoute {
        if configured.count == 1, let only = configured.first { return .pair(only) }
        if let claimed, configured.contains(claimed) { return .pair(claimed) }
        return .unconfigured(claimed: claimed)
    }

    /// The rejection of a notification of an App Store the deployment does not receive, given how
    /// another App Store's verifier judged it: a payload whose signature held (that verifier
    /// rejected only its app, appAppleId or environment) is rejected naming the App Store it is
    /// of; any other rejection (a bad signature, an untrusted chain) is kept as it is.
    package static func rejection(unconfigured claimed: AppStorePair?, judged: Rejection, configured: [AppStorePair]) -> Rejection {
        guard [.wrongBundle, .wrongApp, .wrongEnvironment].contains(judged.reason), let claimed else { return judged }
        let receives = configured.map(\.description).joined(separator: ", ")
        let appKnown = configured.contains { $0.bundleId == claimed.bundleId }
        let name = "\(claimed.bundleId.prefix(100)) \(claimed.environment.rawValue.prefix(20))"
        return Rejection(
            appKnown ? .wrongEnvironment : .wrongBundle,
            "the notification is of \(name), which this deployment does not receive (it receives \(receives))"
        )
    }
}

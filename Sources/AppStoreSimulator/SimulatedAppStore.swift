package import Foundation
package import SignedData

/// One environment's App Store Server API host (Production's or Sandbox's) serving several apps,
/// as Apple does: a team's one In-App Purchase key signs the JWT of each of its apps, and the
/// JWT's `bid` claim says which app a request is about. Each app is a `SimulatedAPI` of its own
/// (its customers, its notifications, its rate budget per endpoint, its injected faults), all
/// signed by one Apple (one PKI). A request whose `bid` names no app here is refused 401, as one
/// whose JWT fails any other check: the app then checks the JWT in full.
package final class SimulatedAppStore: Sendable {
    /// Every app of this host, by bundle ID.
    package let apps: [String: SimulatedAPI]
    package let environment: AppStoreEnvironment

    /// The host of `apps`: at least one, all of one environment, no bundle ID twice.
    package init(_ apps: [SimulatedAPI]) throws {
        guard let first = apps.first else { throw SimulatorError("an App Store host needs at least one app") }
        let environment = first.scenario.configuration.environment
        guard apps.allSatisfy({ $0.scenario.configuration.environment == environment }) else {
            throw SimulatorError("one host serves one environment: Production and Sandbox are two hosts")
        }
        var byBundle: [String: SimulatedAPI] = [:]
        for api in apps {
            let bundleId = api.scenario.configuration.bundleId
            guard byBundle[bundleId] == nil else { throw SimulatorError("\(bundleId) is listed twice") }
            byBundle[bundleId] = api
        }
        self.apps = byBundle
        self.environment = environment
    }

    /// The app a request's bearer JWT names (its `bid`, read without checking the signature:
    /// the app checks the whole JWT).
    package func app(authorization: String?) -> SimulatedAPI? {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return nil }
        let parts = authorization.dropFirst("Bearer ".count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let claims = Base64URL.decode(parts[1]) else { return nil }
        struct Claims: Decodable { var bid: String? }
        guard let bid = (try? JSONDecoder().decode(Claims.self, from: Data(claims)))?.bid else { return nil }
        return apps[bid]
    }

    /// The answer of the app the request names; 401 when it names none of them.
    package func handle(method: String, path: String, query: [(String, String)], authorization: String?, body: [UInt8], now: Date = Date()) -> SimulatedAPI.Answer {
        guard let app = app(authorization: authorization) else { return SimulatedAPI.Answer(status: 401, headers: [], body: []) }
        return app.handle(method: method, path: path, query: query, authorization: authorization, body: body, now: now)
    }
}

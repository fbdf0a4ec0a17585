import Foundation
public import SignedData

/// Where the App Store Server API is: Apple's host for the environment, or an override (the
/// simulator, tests). Plain http is accepted only to loopback addresses, so that a bearer
/// token never crosses a network in clear text.
public struct APIBaseURL: Hashable, Sendable, CustomStringConvertible {
    public let url: String

    public static let production = APIBaseURL(uncheckedURL: "https://api.storekit.apple.com")
    public static let sandbox = APIBaseURL(uncheckedURL: "https://api.storekit-sandbox.apple.com")

    public static func apple(_ environment: AppStoreEnvironment) -> APIBaseURL {
        environment == .production ? .production : .sandbox
    }

    private init(uncheckedURL: String) { self.url = uncheckedURL }

    public init(_ text: String) throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else {
            throw APIBaseURLError(description: "is not an absolute URL such as https://api.storekit.apple.com")
        }
        switch scheme {
        case "https": break
        case "http":
            guard Self.isLoopback(host) else {
                throw APIBaseURLError(description: "uses plain http to \(host), which is not a loopback address; use https")
            }
        default:
            throw APIBaseURLError(description: "must use https (or http to a loopback address), not \(scheme)")
        }
        var trimmed = text
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        self.url = trimmed
    }

    /// Whether `host` is a loopback address (`localhost`, `127.x.x.x`, `::1`): the only hosts
    /// plain http may go to.
    public static func isLoopback(_ host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if bare == "localhost" || bare == "::1" { return true }
        let octets = bare.split(separator: ".")
        return octets.count == 4 && octets.first == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    public var description: String { url }
}

public struct APIBaseURLError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

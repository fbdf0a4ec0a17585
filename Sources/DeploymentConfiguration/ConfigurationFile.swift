package import Foundation
package import SignedData
import Yams
package import RevenueMetrics

/// The deployment's configuration file (YAML): the database, Apple's root certificates, and every
/// app with the environments it is kept in. The contract other tools write:
///
/// ```yaml
/// database: postgresql://…                 # DATABASE_URL wins when set
/// rootCertificates: [/etc/appstore/AppleRootCA-G3.cer]
/// overdueAfter: 1h                         # optional: how late a notification Apple owes is overdue
/// audit:                                   # optional: the nightly's audit of a random sample
///   sample: 300                            # accounts per App Store (0: none)
///   maxShareOfRateLimit: 0.1               # of Apple's rate for the endpoints it calls
/// apps:
///   - bundleId: com.example.app
///     appAppleId: 1234567890               # required when Production is listed
///     issuerId: 57246542-96fe-1a63-e053-0824d011072a
///     keyId: 2X9R4HXF34
///     privateKey: /run/secrets/SubscriptionKey_2X9R4HXF34.p8
///     environments: [Production, Sandbox]
///     apiBaseURL:                          # optional, per environment
///       Sandbox: http://127.0.0.1:9002
///     deliverTo:                           # optional, per environment
///       Production: https://backend.example.com/apple
///     refundRequests:                      # optional: answer refund requests from these facts
///       facts: /etc/appstore-reconcile/refund-facts.sql
/// ```
///
/// Read strictly: an unknown key, a value of the wrong kind, a duplicate bundle ID, Production
/// without `appAppleId`, or a private key file that cannot be read is a `ConfigurationFileError`
/// naming the key (`apps[1].privateKey`) and the file. The file holds paths, never key material.
package struct ConfigurationFile: Sendable, Hashable {
    package struct App: Sendable, Hashable {
        package var bundleId: String
        package var appAppleId: Int64?
        package var issuerId: String
        package var keyId: String
        /// The path of the In-App Purchase key (.p8).
        package var privateKey: String
        package var environments: [AppStoreEnvironment]
        /// Per environment: a host other than Apple's (the simulator, tests).
        package var apiBaseURL: [AppStoreEnvironment: String]
        /// Per environment: the team's handler that recovered notifications are POSTed to.
        package var deliverTo: [AppStoreEnvironment: String]
        /// `refundRequests.facts`: the path of the SQL file whose one SELECT gives the team's facts
        /// about a refund request, to answer Apple with (nil: refund requests are never answered).
        package var refundFacts: String? = nil

        /// Each environment of this app, as a pair.
        package var pairs: [AppStorePair] { environments.map { AppStorePair(bundleId: bundleId, environment: $0) } }
    }

    /// Where the file was read from, for messages.
    package var path: String
    package var database: String?
    package var rootCertificates: [String]?
    /// How long past its due time a notification Apple owes counts as overdue (`overdueAfter`:
    /// `90m`, `1h`, `2h`, `1d`; nil: the default hour).
    package var overdueAfter: TimeInterval? = nil
    /// `audit.sample`: accounts per App Store the nightly's audit compares (nil: the default).
    package var auditSample: Int? = nil
    /// `audit.maxShareOfRateLimit`: the share of Apple's rate the nightly's audit may use, in (0, 1].
    package var auditMaxShareOfRateLimit: Double? = nil
    /// `products`: a product ID's standard duration (ISO 8601: P1W, P1M, P1Y), for `metrics`
    /// where its periods cannot tell it (Sandbox's accelerated renewals).
    package var products: [String: ProductDuration] = [:]
    /// `smallBusinessProgram: true`: Apple's Small Business Program, 85% proceeds from the first year.
    package var smallBusinessProgram = false
    package var apps: [App]

    /// Every (app, environment) pair the file names, in its order.
    package var pairs: [AppStorePair] { apps.flatMap(\.pairs) }

    package func app(_ bundleId: String) -> App? { apps.first { $0.bundleId == bundleId } }

    /// Reads and checks the file at `path`. `keysNeeded: false` for a command that calls no
    /// Apple API (`serve`): its private keys need not be readable where it runs, so the public
    /// receiver can run without them.
    package static func load(path: String, keysNeeded: Bool = true) throws -> ConfigurationFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationFileError(file: path, key: nil, problem: "cannot be read")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationFileError(file: path, key: nil, problem: "is not UTF-8 text")
        }
        return try parse(text, path: path, keyReadable: { keysNeeded ? FileManager.default.isReadableFile(atPath: $0) : true })
    }

    /// Parses and checks YAML text; `keyReadable` says whether a private key path can be read.
    package static func parse(_ text: String, path: String, keyReadable: (String) -> Bool) throws -> ConfigurationFile {
        let reader = Reader(path: path)
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text) else { throw reader.error(nil, "is empty: it must list `apps`") }
            root = node
        } catch let error as ConfigurationFileError {
            throw error
        } catch {
            // Only where: the parser's message quotes the line, which may hold a password.
            throw reader.error(nil, "is not valid YAML\(Self.where(error))")
        }
        let top = try reader.mapping(root, at: nil, keys: ["database", "rootCertificates", "overdueAfter", "audit", "products", "smallBusinessProgram", "apps"])
        var file = ConfigurationFile(path: path, database: nil, rootCertificates: nil, apps: [])
        file.database = try top["database"].map { try reader.string($0, at: "database") }
        file.rootCertificates = try top["rootCertificates"].map { node in
            let paths = try reader.strings(node, at: "rootCertificates")
            guard !paths.isEmpty else { throw reader.error("rootCertificates", "names no file") }
            return paths
        }
        file.overdueAfter = try top["overdueAfter"].map { try reader.duration($0, at: "overdueAfter", within: 0...7 * 86_400) }
        if let node = top["audit"] {
            let audit = try reader.mapping(node, at: "audit", keys: ["sample", "maxShareOfRateLimit"])
            file.auditSample = try audit["sample"].map { node in
                guard let text = node.string, let value = Int(text), (0...1_000_000).contains(value) else {
                    throw reader.error("audit.sample", "must be a whole number of accounts from 0 (no audit) to 1000000\(reader.line(node))")
                }
                return value
            }
            file.auditMaxShareOfRateLimit = try audit["maxShareOfRateLimit"].map { node in
                guard let text = node.string, let value = Double(text), value.isFinite, value > 0, value <= 1 else {
                    throw reader.error("audit.maxShareOfRateLimit", "must be a share above 0 and at most 1, such as 0.1\(reader.line(node))")
                }
                return value
            }
        }
        if let node = top["products"] {
            for (id, value) in try reader.mapping(node, at: "products", keys: nil) {
                guard let text = value.string, let duration = ProductDuration(text) else {
                    throw reader.error("products.\(id)", "must be an ISO 8601 duration of one unit, such as P1W, P1M, P3M or P1Y\(reader.line(value))")
                }
                file.products[id] = duration
            }
        }
        if let node = top["smallBusinessProgram"] {
            guard let value = node.bool else { throw reader.error("smallBusinessProgram", "must be true or false\(reader.line(node))") }
            file.smallBusinessProgram = value
        }
        guard let appsNode = top["apps"] else { throw reader.error("apps", "is missing: list at least one app") }
        guard let list = appsNode.sequence, !list.isEmpty else { throw reader.error("apps", "must be a list of at least one app") }
        var seen: Set<String> = []
        for (index, node) in list.enumerated() {
            let app = try reader.app(node, at: "apps[\(index)]", keyReadable: keyReadable)
            guard seen.insert(app.bundleId).inserted else {
                throw reader.error("apps[\(index)].bundleId", "repeats \(app.bundleId): each app is listed once, with all its environments")
            }
            file.apps.append(app)
        }
        return file
    }
}

extension ConfigurationFile {
    /// The parser's problem and position, without the quoted line.
    static func `where`(_ error: any Error) -> String {
        switch error as? YamlError {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _), .composer(_, let problem, let mark, _):
            " (line \(mark.line), column \(mark.column): \(problem.prefix(120)))"
        default: ""
        }
    }
}

/// A configuration file that cannot be used: the file, the key and what is wrong (exit code 78).
package struct ConfigurationFileError: Error, Hashable, Sendable, CustomStringConvertible {
    package var file: String
    /// The key's path in the file (`apps[0].privateKey`); nil for the file as a whole.
    package var key: String?
    package var problem: String

    package var description: String {
        key.map { "\($0) in \(file) \(problem)" } ?? "the configuration file \(file) \(problem)"
    }
}

/// Reads nodes strictly, naming each key it finds wrong.
private struct Reader {
    let path: String

    func error(_ key: String?, _ problem: String) -> ConfigurationFileError {
        ConfigurationFileError(file: path, key: key, problem: problem)
    }

    func line(_ node: Node) -> String { node.mark.map { " (line \($0.line))" } ?? "" }

    /// A mapping whose keys are all among `keys`.
    /// `keys: nil`: any text key (a product ID).
    func mapping(_ node: Node, at key: String?, keys: Set<String>?) throws -> [String: Node] {
        guard let mapping = node.mapping else { throw error(key, "must be a mapping of keys to values\(line(node))") }
        var found: [String: Node] = [:]
        for (name, value) in mapping {
            guard let text = name.string else { throw error(key, "has a key that is not text\(line(name))") }
            let full = key.map { "\($0).\(text)" } ?? text
            if let keys, !keys.contains(text) {
                throw error(full, "is not a known key\(line(name)); known here: \(keys.sorted().joined(separator: ", "))")
            }
            guard found[text] == nil else { throw error(full, "is given twice\(line(name))") }
            found[text] = value
        }
        return found
    }

    /// A duration: a number and its unit, `s`, `m`, `h` or `d` (`90m`, `1h`), within `range` seconds.
    func duration(_ node: Node, at key: String, within range: ClosedRange<TimeInterval>) throws -> TimeInterval {
        let text = try string(node, at: key)
        let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        guard let unit = text.last.flatMap({ units[$0] }), let value = Double(text.dropLast()), value.isFinite, range.contains(value * unit) else {
            throw error(key, "must be a duration from \(Int(range.lowerBound))s to \(Int(range.upperBound / 86_400))d, such as 90m, 1h or 1d\(line(node))")
        }
        return value * unit
    }

    func string(_ node: Node, at key: String) throws -> String {
        guard node.scalar != nil, let text = node.string?.trimmingCharacters(in: .whitespaces), !text.isEmpty else {
            throw error(key, "must be a non-empty text\(line(node))")
        }
        return text
    }

    func strings(_ node: Node, at key: String) throws -> [String] {
        guard let list = node.sequence else { throw error(key, "must be a list\(line(node))") }
        var found: [String] = []
        for (index, item) in list.enumerated() { found.append(try string(item, at: "\(key)[\(index)]")) }
        return found
    }

    func environment(_ text: String, at key: String, _ node: Node) throws -> AppStoreEnvironment {
        guard let environment = AppStoreEnvironment(configurationValue: text) else {
            throw error(key, "must be Production or Sandbox, not '\(text.prefix(40))'\(line(node))")
        }
        return environment
    }

    /// A mapping of environment to text (`apiBaseURL`, `deliverTo`), for environments the app lists.
    func perEnvironment(_ node: Node, at key: String, listed: [AppStoreEnvironment]) throws -> [AppStoreEnvironment: String] {
        let entries = try mapping(node, at: key, keys: ["Production", "Sandbox"])
        var found: [AppStoreEnvironment: String] = [:]
        for (name, value) in entries {
            let environment = try environment(name, at: "\(key).\(name)", value)
            guard listed.contains(environment) else {
                throw error("\(key).\(name)", "names an environment the app's `environments` does not list")
            }
            found[environment] = try string(value, at: "\(key).\(name)")
        }
        return found
    }

    func app(_ node: Node, at key: String, keyReadable: (String) -> Bool) throws -> ConfigurationFile.App {
        let entries = try mapping(
            node, at: key,
            keys: ["bundleId", "appAppleId", "issuerId", "keyId", "privateKey", "environments", "apiBaseURL", "deliverTo", "refundRequests"]
        )
        func required(_ name: String) throws -> Node {
            guard let value = entries[name] else { throw error("\(key).\(name)", "is missing") }
            return value
        }
        let bundleId = try string(try required("bundleId"), at: "\(key).bundleId")
        guard !bundleId.contains(where: \.isWhitespace) else { throw error("\(key).bundleId", "must be a bundle ID such as com.example.app") }
        let environmentsNode = try required("environments")
        var environments: [AppStoreEnvironment] = []
        for (index, text) in try strings(environmentsNode, at: "\(key).environments").enumerated() {
            let environment = try environment(text, at: "\(key).environments[\(index)]", environmentsNode)
            guard !environments.contains(environment) else { throw error("\(key).environments", "lists \(environment) twice") }
            environments.append(environment)
        }
        guard !environments.isEmpty else { throw error("\(key).environments", "must list Production, Sandbox or both") }
        var appAppleId: Int64?
        if let node = entries["appAppleId"] {
            guard let text = node.string, let value = Int64(text), value > 0 else {
                throw error("\(key).appAppleId", "must be the app's numeric App Store ID\(line(node))")
            }
            appAppleId = value
        }
        if environments.contains(.production) && appAppleId == nil {
            throw error("\(key).appAppleId", "is required when Production is listed (the app's numeric App Store ID)")
        }
        let privateKey = try string(try required("privateKey"), at: "\(key).privateKey")
        // The value is not echoed: it should be a path, but may be a key pasted in.
        guard keyReadable(privateKey) else { throw error("\(key).privateKey", "names a file that cannot be read") }
        var refundFacts: String?
        if let node = entries["refundRequests"] {
            let refund = try mapping(node, at: "\(key).refundRequests", keys: ["facts"])
            guard let facts = refund["facts"] else { throw error("\(key).refundRequests.facts", "is missing: the path of the facts query's SQL file") }
            refundFacts = try string(facts, at: "\(key).refundRequests.facts")
        }
        return ConfigurationFile.App(
            bundleId: bundleId, appAppleId: appAppleId,
            issuerId: try string(try required("issuerId"), at: "\(key).issuerId"),
            keyId: try string(try required("keyId"), at: "\(key).keyId"),
            privateKey: privateKey, environments: environments,
            apiBaseURL: try entries["apiBaseURL"].map { node in
                try perEnvironment(node, at: "\(key).apiBaseURL", listed: environments)
            } ?? [:],
            deliverTo: try entries["deliverTo"].map { node in
                try perEnvironment(node, at: "\(key).deliverTo", listed: environments)
            } ?? [:],
            refundFacts: refundFacts
        )
    }
}

import AppStoreSimulator
import Deployment
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SignedData
import TestSupport
import ThrowawayPostgres
import Testing

/// The built binary, run as an operator would run it.
@Suite("appstore-reconcile on the command line")
struct CommandLineTests {
    /// A scratch directory removed when the value goes away.
    final class Scratch {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("appstore-reconcile-test-\(UUID().uuidString)")
        init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
        deinit { try? FileManager.default.removeItem(at: url) }
        func write(_ name: String, _ text: String) throws -> String {
            let path = url.appendingPathComponent(name).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
    }

    static let bundleId = "com.example.cli"

    /// A genuine sandbox notification from a fresh test PKI, and the root to configure.
    static func signedNotification(bundleId: String = bundleId) throws -> (jws: String, rootPEM: String) {
        let pki = try TestPKI()
        let signer = try pki.signer()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var transaction = TransactionPayload(transactionId: "3000000000000001", originalTransactionId: "3000000000000000")
        transaction.bundleId = bundleId
        transaction.environment = .sandbox
        transaction.signedDate = now
        transaction.productId = "com.example.cli.yearly"
        var renewal = RenewalInfoPayload(originalTransactionId: "3000000000000000")
        renewal.environment = .sandbox
        renewal.signedDate = now
        renewal.autoRenewStatus = 0
        let notification = NotificationPayload(
            notificationType: .expired, subtype: .voluntary, notificationUUID: "4b0e3c1a-9f9e-4c7a-8d2b-1a2b3c4d5e6f",
            signedDate: now,
            data: NotificationData(
                bundleId: bundleId, environment: .sandbox, signedTransactionInfo: try signer.sign(transaction),
                signedRenewalInfo: try signer.sign(renewal), status: .expired
            )
        )
        return (try signer.sign(notification), try pki.rootPEM())
    }

    @Test func helpNamesEverySubcommandAndTheExitCodes() async throws {
        let result = try await BuiltBinary.run(["--help"])
        #expect(result.exitCode == 0)
        // Help is wrapped to the terminal's width: compare with whitespace folded.
        let text = result.standardOutput.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for word in ["run", "ingest", "migrate", "verify", "appstore-reconcile-dev demo", "APPSTORE_ROOT_CERTIFICATES", "78 configuration error"] {
            #expect(text.contains(word), "--help mentions \(word)")
        }
        let commands = [
            ("appstore-reconcile", BuiltBinary.path,
             ["run", "nightly", "consumption-requests", "repair", "ingest", "serve", "check", "status", "changes", "deliver", "detect-outage", "migrate", "verify"]),
            ("appstore-reconcile-dev", BuiltBinary.devPath, ["demo", "throwaway-postgres", "simulate"]),
        ]
        for (name, binary, subcommands) in commands {
            for subcommand in subcommands {
                let help = try await BuiltBinary.run([subcommand, "--help"], binary: binary)
                #expect(help.exitCode == 0, "\(name) \(subcommand) --help")
                #expect(help.standardOutput.contains("USAGE: \(name) \(subcommand)"))
                // The discussion reads as prose: no stray line-continuation backslash, no unexpanded interpolation.
                #expect(!help.standardOutput.contains("\\\n") && !help.standardOutput.contains("\\("), "\(subcommand) --help: \(help.standardOutput)")
            }
        }
    }

    /// The binary teams deploy carries neither the App Store simulator (and its test PKI) nor
    /// the throwaway PostgreSQL: their commands are unknown to it, and no symbol of those
    /// modules is in it (Swift mangles a module's name as its length and the name). The
    /// companion binary has both, which shows the search finds them where they are.
    @Test func theDeployedBinaryCarriesNoSimulatorNorThrowawayPostgres() async throws {
        for command in ["demo", "simulate", "throwaway-postgres"] {
            #expect(try await BuiltBinary.run([command]).exitCode == 64, "appstore-reconcile \(command) is not a command")
        }
        let deployed = try Data(contentsOf: URL(fileURLWithPath: BuiltBinary.path))
        let companion = try Data(contentsOf: URL(fileURLWithPath: BuiltBinary.devPath))
        for module in ["AppStoreSimulator", "ThrowawayPostgres"] {
            let mangled = Data("\(module.count)\(module)".utf8)
            #expect(deployed.firstRange(of: mangled) == nil, "appstore-reconcile holds \(module)")
            #expect(companion.firstRange(of: mangled) != nil, "appstore-reconcile-dev holds \(module)")
        }
    }

    @Test func anUnknownFlagIsAUsageError() async throws {
        let result = try await BuiltBinary.run(["migrate", "--no-such-flag"])
        #expect(result.exitCode == 64)
    }

    @Test func migrateWithoutADatabaseIsAConfigurationErrorNamingTheSetting() async throws {
        let result = try await BuiltBinary.run(["migrate"])
        #expect(result.exitCode == 78)
        #expect(result.standardError.contains("DATABASE_URL"))
    }

    @Test func migrateCreatesTheLedgerThenFindsItUpToDate() async throws {
        let url = try await TestDatabase.freshDatabase()
        let first = try await BuiltBinary.run(["migrate"], environment: ["DATABASE_URL": url.connectionString])
        #expect(first.exitCode == 0, "\(first.combined)")
        #expect(first.standardOutput.contains("applied 0001_ledger.sql"))
        let second = try await BuiltBinary.run(["migrate"], environment: ["DATABASE_URL": url.connectionString])
        #expect(second.exitCode == 0)
        #expect(second.standardOutput.contains("up to date"))
        #expect(!second.standardOutput.contains("applied 0001"))
    }

    @Test func anUnreachableDatabaseIsATemporaryFailureAndThePasswordStaysSecret() async throws {
        let result = try await BuiltBinary.run(["migrate"], environment: ["DATABASE_URL": "postgresql://ledger:Hunter2Secret@127.0.0.1:1/ledger"])
        #expect(result.exitCode == 75, "\(result.combined)")
        #expect(result.standardError.contains("database"))
        #expect(!result.combined.contains("Hunter2Secret"))
    }

    @Test func verifyPrintsTheNotificationWithNestedPayloadsDecodedAndExitsZero() async throws {
        let scratch = try Scratch()
        let (jws, rootPEM) = try Self.signedNotification()
        let root = try scratch.write("root.pem", rootPEM)
        let result = try await BuiltBinary.run(
            ["verify", "-"],
            environment: ["APPSTORE_ROOT_CERTIFICATES": root, "APPSTORE_BUNDLE_ID": Self.bundleId, "APPSTORE_ENVIRONMENT": "Sandbox"],
            standardInput: jws
        )
        #expect(result.exitCode == 0, "\(result.combined)")
        let output = try JSONDecoder().decode([String: JSONValue].self, from: Data(result.standardOutput.utf8))
        #expect(output["verdict"] == .string("verified"))
        guard case .object(let payload)? = output["payload"], case .object(let data)? = payload["data"],
            case .object(let transaction)? = data["signedTransactionInfo"], case .object(let renewal)? = data["signedRenewalInfo"]
        else {
            Issue.record("nested payloads are not decoded in place: \(result.standardOutput)")
            return
        }
        #expect(transaction["transactionId"] == .string("3000000000000001"))
        #expect(renewal["autoRenewStatus"] == .number(0))
        #expect(result.standardError.hasPrefix("verified"))
    }

    @Test func verifyAcceptsApplesWebhookBodyAndAHistoryItemFromAFile() async throws {
        let scratch = try Scratch()
        let (jws, rootPEM) = try Self.signedNotification()
        let environment = [
            "APPSTORE_ROOT_CERTIFICATES": try scratch.write("root.pem", rootPEM), "APPSTORE_BUNDLE_ID": Self.bundleId,
            "APPSTORE_ENVIRONMENT": "sandbox",
        ]
        let webhook = try scratch.write("webhook.json", "{\"signedPayload\": \"\(jws)\"}")
        let historyItem = try scratch.write(
            "item.json",
            "{\"sendAttempts\":[{\"attemptDate\":1698148900000,\"sendAttemptResult\":\"TIMED_OUT\"}],\"signedPayload\":\"\(jws)\"}"
        )
        for file in [webhook, historyItem] {
            let result = try await BuiltBinary.run(["verify", file], environment: environment)
            #expect(result.exitCode == 0, "\(file): \(result.combined)")
        }
    }

    @Test func verifyExplainsARejectionInOneLineAndExits65() async throws {
        let scratch = try Scratch()
        let (jws, _) = try Self.signedNotification()
        let unrelatedRoot = try TestPKI().rootPEM()
        let result = try await BuiltBinary.run(
            ["verify", "-", "--root-certificates", try scratch.write("other.pem", unrelatedRoot), "--bundle-id", Self.bundleId,
             "--environment", "Sandbox"],
            standardInput: jws
        )
        #expect(result.exitCode == 65)
        let line = result.standardError.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!line.contains("\n"), "one line: \(line)")
        #expect(line.hasPrefix("rejected (untrusted_chain): the certificate chain does not lead to a configured Apple root certificate"))
        #expect(result.standardOutput.contains("\"unverifiedPayload\""))
    }

    @Test func verifyWithABundleMismatchSaysSo() async throws {
        let scratch = try Scratch()
        let (jws, rootPEM) = try Self.signedNotification(bundleId: "com.example.someone-else")
        let result = try await BuiltBinary.run(
            ["verify", "--root-certificates", try scratch.write("root.pem", rootPEM), "--bundle-id", Self.bundleId, "--environment", "Sandbox"],
            standardInput: jws
        )
        #expect(result.exitCode == 65)
        #expect(result.standardError.contains("wrong_bundle"))
        #expect(result.standardError.contains("com.example.someone-else"))
    }

    @Test func verifyWithoutRootCertificatesIsAConfigurationError() async throws {
        let result = try await BuiltBinary.run(["verify", "--bundle-id", "x.y", "--environment", "Sandbox"], standardInput: "a.b.c")
        #expect(result.exitCode == 78)
        #expect(result.standardError.contains("APPSTORE_ROOT_CERTIFICATES"))
    }

    @Test func verifyInProductionWithoutTheAppAppleIdIsAConfigurationError() async throws {
        let scratch = try Scratch()
        let root = try scratch.write("root.pem", try TestPKI().rootPEM())
        let result = try await BuiltBinary.run(
            ["verify", "--root-certificates", root, "--bundle-id", "x.y", "--environment", "Production"], standardInput: "a.b.c"
        )
        #expect(result.exitCode == 78)
        #expect(result.standardError.contains("APPSTORE_APP_APPLE_ID"))
    }

    @Test func verifyOfAnUnreadableFileExits66() async throws {
        let scratch = try Scratch()
        let root = try scratch.write("root.pem", try TestPKI().rootPEM())
        let result = try await BuiltBinary.run(["verify", "/nonexistent/payload.jws", "--root-certificates", root, "--bundle-id", "x.y", "--environment", "Sandbox"])
        #expect(result.exitCode == 66)
    }

    @Test func demoRecoversTheSimulatedOutageAndASecondRunAppliesNothing() async throws {
        let scratch = try Scratch()
        let result = try await BuiltBinary.run(["demo", "--customers", "80", "--report-dir", scratch.url.path], binary: BuiltBinary.devPath)
        #expect(result.exitCode == 0, "\(result.combined)")
        let output = result.standardOutput
        #expect(output.contains("Created the ledger schema"))
        // Two apps in Production and Sandbox: a line per App Store for each of the three runs.
        let stores = ["com.example.photos Production", "com.example.photos Sandbox", "com.example.recipes Production", "com.example.recipes Sandbox"]
        let summaries = output.split(separator: "\n").filter { $0.contains("fetched ") }
        // Then the refund requests the outage hid: two consumption-requests --answer checks over
        // the four App Stores.
        #expect(summaries.count == 20, "dry run, run, second run, then two answering checks, each over four App Stores: \(summaries)")
        for (index, store) in stores.enumerated() {
            let lines = summaries.filter { $0.hasPrefix(store + ": ") }
            #expect(lines.count == 5, "\(store): \(lines)")
            guard lines.count == 5 else { continue }
            if store.hasSuffix("Production") {
                #expect(lines[3].contains("refund requests: 2 sent, ") && lines[3].contains("no_consent"), "\(lines[3])")
                #expect(!lines[4].contains(" sent,") && lines[4].contains("refund requests: "), "the second check sends nothing: \(lines[4])")
            }
            #expect(lines[0].contains("would apply"), "\(lines[0])")
            #expect(lines[2].contains("missed 0, applied 0"), "\(lines[2])")
            // Each run's pass 2 is its own: the real run checks the accounts the dry run looked at too.
            if index == 0 { #expect(lines[0].contains("accounts checked") && lines[1].contains("accounts checked"), "\(lines)") }
            #expect(!lines[1].contains("missed 0,"), "the outage missed notifications of \(store)")
        }
        #expect(output.contains("appstore-reconcile run --config "), "the demo shows the command it runs")
        for run in ["dry-run", "run", "second-run"] {
            #expect(FileManager.default.fileExists(atPath: scratch.url.path + "/\(run)/report.html"), "the summary linking each App Store's")
            for store in stores {
                let path = store.replacingOccurrences(of: " ", with: "/")
                #expect(FileManager.default.fileExists(atPath: scratch.url.path + "/\(run)/\(path)/report.md"))
                #expect(FileManager.default.fileExists(atPath: scratch.url.path + "/\(run)/\(path)/report.json"))
            }
        }
        #expect(output.contains("subtype altered: rejected (bad_signature)"))
        #expect(output.contains("(1.00 per answer)"), "one Send Consumption Information request per answer")
        // The simulator enforces Apple's rate limits in the demo; the tool paces itself within them.
        #expect(output.contains("Sandbox), enforced: 0 of "), "no request answered 429: \(output.suffix(600))")
        #expect(output.split(separator: "\n").count { $0.contains("hurt subscriptions (from ") } == 4, "compensate --dry-run over the four App Stores")
        // What Apple owes, from the ledger alone: the outage's losses before the runs, none after them.
        let owed = output.split(separator: "\n").filter { $0.hasPrefix("Overdue: ") }
        #expect(owed.count == 2, "status before and after the recovery: \(owed)")
        #expect(owed.first.map { $0.hasPrefix("Overdue: ") && !$0.hasPrefix("Overdue: none") } == true, "the outage's renewals are overdue: \(owed)")
        #expect(owed.last?.hasPrefix("Overdue: none") == true, "the recovery leaves none: \(owed)")
        // The audit states each App Store's bound.
        #expect(output.split(separator: "\n").count { $0.contains("compared with Apple") && $0.contains("at 95% confidence at most") } == 4, "\(output.suffix(1500))")
    }
}

@Suite("appstore-reconcile-dev simulate")
struct SimulateCommandTests {
    @Test func simulateStartsPrintsHowToUseItAndCurlGetsAPage() async throws {
        let (child, text) = try Self.startSimulate(["simulate", "--customers", "30", "--seed", "3"])
        defer { child.send(SIGKILL); child.wait() }
        for variable in ["APPSTORE_API_BASE_URL=http://127.0.0.1:", "APPSTORE_PRIVATE_KEY=", "APPSTORE_ROOT_CERTIFICATES=", "APPSTORE_BUNDLE_ID="] {
            #expect(text.contains("export \(variable)"), "prints \(variable)")
        }
        let curl = try #require(text.split(separator: "\n").first { $0.contains("curl -s") }).trimmingCharacters(in: .whitespaces)
        let result = try ChildProcess.run("/bin/sh", ["-c", curl])
        #expect(result.status == 0)
        let page = try JSONDecoder().decode(NotificationHistoryPageShape.self, from: Data(result.standardOutput.utf8))
        #expect(!page.notificationHistory.isEmpty, "a page of notifications: \(result.standardOutput.prefix(200))")
        child.send(SIGTERM)
        #expect(child.wait() == 0, "stops cleanly on SIGTERM")
    }

    /// `simulate --deployment`: the configuration file it prints names both apps in both
    /// environments, and `check --config` on it reaches all four App Stores.
    @Test func simulateDeploymentWritesAConfigurationFileOfTwoAppsInBothEnvironmentsThatCheckAccepts() async throws {
        let (child, text) = try Self.startSimulate(["simulate", "--deployment", "--customers", "20", "--seed", "3"])
        defer { child.send(SIGKILL); child.wait() }
        let line = try #require(text.split(separator: "\n").first { $0.contains("export APPSTORE_CONFIG=") }, "\(text)")
        let config = String(line.split(separator: "=", maxSplits: 1)[1])
        let file = try String(contentsOfFile: config, encoding: .utf8)
        for name in ["bundleId: com.example.photos", "bundleId: com.example.recipes", "environments: [Production, Sandbox]"] {
            #expect(file.contains(name), "\(name) in \(file)")
        }
        let check = try await BuiltBinary.run(
            ["check", "--config", config, "--webhook-timeout", "1", "--database-url", "postgresql://nobody@127.0.0.1:9/none?sslmode=disable"])
        for pair in ["com.example.photos Production", "com.example.photos Sandbox", "com.example.recipes Production", "com.example.recipes Sandbox"] {
            #expect(check.standardOutput.contains("ok   \(pair): root certificates: 1 loaded"), "\(pair): \(check.standardOutput)")
            #expect(check.standardOutput.contains("ok   \(pair): private key "), "\(pair): \(check.standardOutput)")
            // Its host tells the apps apart by the JWT's bid: each app's own token is accepted.
            #expect(check.standardOutput.contains("ok   \(pair): Apple accepts the credentials"), "\(pair): \(check.standardOutput)")
        }
        child.send(SIGTERM)
        #expect(child.wait() == 0, "stops cleanly on SIGTERM")
    }

    /// Starts `appstore-reconcile-dev` with `arguments` (a `simulate`) and reads its output up to
    /// its "Press Ctrl-C" (60 s at most): the process and what it printed.
    static func startSimulate(_ arguments: [String]) throws -> (ChildProcess, String) {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        let child = try ChildProcess.spawn(BuiltBinary.devPath, arguments, environment: BuiltBinary.environment([:]), standardOutput: descriptors[1])
        close(descriptors[1])
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 8192)
        let deadline = Date().addingTimeInterval(60)
        while !text.contains("Press Ctrl-C"), Date() < deadline {
            let count = buffer.withUnsafeMutableBytes { read(descriptors[0], $0.baseAddress, $0.count) }
            if count <= 0 { break }
            text += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        close(descriptors[0])
        return (child, text)
    }

    struct NotificationHistoryPageShape: Decodable {
        struct Item: Decodable { var signedPayload: String }
        var notificationHistory: [Item]
        var hasMore: Bool
    }
}

import DeploymentConfiguration
import Foundation
import SignedData
import Testing

/// The configuration file read strictly, without I/O: the text in, the apps or the key that is
/// wrong out (the command line's exit 78 is tested end to end in AppStoreReconcileTests).
@Suite struct ConfigurationFileTests {
    static let twoApps = """
        database: postgresql://reconciler@db/ledger
        rootCertificates: [/etc/appstore/AppleRootCA-G3.cer]
        apps:
          - bundleId: com.example.app
            appAppleId: 1234567890
            issuerId: 57246542-96fe-1a63-e053-0824d011072a
            keyId: 2X9R4HXF34
            privateKey: /run/secrets/a.p8
            environments: [Production, Sandbox]
            apiBaseURL:
              Sandbox: http://127.0.0.1:9002
            deliverTo:
              Production: https://backend.example.com/apple
          - bundleId: com.example.other
            issuerId: 57246542-96fe-1a63-e053-0824d011072a
            keyId: 3Y0S5IYG45
            privateKey: /run/secrets/b.p8
            environments: [Sandbox]
        """

    static func parse(_ text: String, readable: Bool = true) throws -> ConfigurationFile {
        try ConfigurationFile.parse(text, path: "/etc/appstore-reconcile.yaml", keyReadable: { _ in readable })
    }

    @Test func everyAppAndEnvironmentIsReadInTheFilesOrder() throws {
        let file = try Self.parse(Self.twoApps)
        #expect(file.pairs == [
            AppStorePair(bundleId: "com.example.app", environment: .production), AppStorePair(bundleId: "com.example.app", environment: .sandbox),
            AppStorePair(bundleId: "com.example.other", environment: .sandbox),
        ])
        #expect(file.database == "postgresql://reconciler@db/ledger")
        #expect(file.app("com.example.app")?.apiBaseURL[.sandbox] == "http://127.0.0.1:9002")
        #expect(file.app("com.example.app")?.deliverTo[.production] == "https://backend.example.com/apple")
        #expect(file.app("com.example.other")?.appAppleId == nil)
    }

    @Test(arguments: [
        ("unknown: 1\n" + twoApps, "unknown"),
        (twoApps.replacingOccurrences(of: "    appAppleId: 1234567890\n", with: ""), "apps[0].appAppleId"),
        (twoApps.replacingOccurrences(of: "com.example.other", with: "com.example.app"), "apps[1].bundleId"),
        (twoApps.replacingOccurrences(of: "[Sandbox]", with: "[Staging]"), "apps[1].environments"),
        ("overdueAfter: soon\n" + twoApps, "overdueAfter"),
        ("overdueAfter: -1h\n" + twoApps, "overdueAfter"),
        ("overdueAfter: 8d\n" + twoApps, "overdueAfter"),
        ("overdueAfter: 60\n" + twoApps, "overdueAfter"),
        ("audit:\n  sample: -1\n" + twoApps, "audit.sample"),
        ("audit:\n  sample: many\n" + twoApps, "audit.sample"),
        ("audit:\n  maxShareOfRateLimit: 0\n" + twoApps, "audit.maxShareOfRateLimit"),
        ("audit:\n  maxShareOfRateLimit: 1.5\n" + twoApps, "audit.maxShareOfRateLimit"),
        ("audit:\n  samples: 3\n" + twoApps, "audit.samples"),
    ])
    func aWrongKeyIsNamed(text: String, key: String) {
        do {
            _ = try Self.parse(text)
            Issue.record("accepted a file whose \(key) is wrong")
        } catch let error as ConfigurationFileError {
            #expect(error.key?.hasPrefix(key) == true || error.problem.contains(key), "\(error)")
            #expect(error.file == "/etc/appstore-reconcile.yaml")
        } catch {
            Issue.record("not a ConfigurationFileError: \(error)")
        }
    }

    @Test func overdueAfterIsADurationAndAnHourWhenNotGiven() throws {
        #expect(try Self.parse(Self.twoApps).overdueAfter == nil, "not given: the default hour applies")
        #expect(try Self.parse("overdueAfter: 90m\n" + Self.twoApps).overdueAfter == 5_400)
        #expect(try Self.parse("overdueAfter: 2h\n" + Self.twoApps).overdueAfter == 7_200)
        #expect(try Self.parse("overdueAfter: 1d\n" + Self.twoApps).overdueAfter == 86_400)
        #expect(try Self.parse("overdueAfter: 0s\n" + Self.twoApps).overdueAfter == 0)
    }

    @Test func theNightlysAuditTakesItsSampleAndShareOrLeavesTheDefaults() throws {
        let plain = try Self.parse(Self.twoApps)
        #expect(plain.auditSample == nil && plain.auditMaxShareOfRateLimit == nil, "not given: the defaults apply")
        let set = try Self.parse("audit:\n  sample: 3000\n  maxShareOfRateLimit: 0.25\n" + Self.twoApps)
        #expect(set.auditSample == 3_000 && set.auditMaxShareOfRateLimit == 0.25)
        #expect(try Self.parse("audit:\n  sample: 0\n" + Self.twoApps).auditSample == 0, "0: no audit")
    }

    @Test func aKeyFileThatCannotBeReadIsNamedWithoutItsContent() {
        do {
            _ = try Self.parse(Self.twoApps, readable: false)
            Issue.record("accepted an unreadable key file")
        } catch let error as ConfigurationFileError {
            #expect(error.key == "apps[0].privateKey")
        } catch {
            Issue.record("not a ConfigurationFileError: \(error)")
        }
    }

    @Test func invalidYAMLSaysWhereWithoutQuotingTheLine() {
        let secret = "postgresql://u:TopSecret1@db/x"
        do {
            _ = try Self.parse("database: \(secret)\napps: [ {\n")
            Issue.record("accepted broken YAML")
        } catch let error as ConfigurationFileError {
            #expect(error.description.contains("not valid YAML"))
            #expect(!error.description.contains("TopSecret1"))
        } catch {
            Issue.record("not a ConfigurationFileError: \(error)")
        }
    }

    @Test func anAppsRefundFactsFileIsReadAndAnUnknownKeyInItNamed() throws {
        let withFacts = Self.twoApps.replacingOccurrences(
            of: "      Production: https://backend.example.com/apple\n",
            with: "      Production: https://backend.example.com/apple\n    refundRequests:\n      facts: /etc/appstore-reconcile/refund-facts.sql\n"
        )
        let file = try Self.parse(withFacts)
        #expect(file.app("com.example.app")?.refundFacts == "/etc/appstore-reconcile/refund-facts.sql")
        #expect(file.app("com.example.other")?.refundFacts == nil)
        do {
            _ = try Self.parse(withFacts.replacingOccurrences(of: "facts: /etc", with: "fact: /etc"))
            Issue.record("accepted refundRequests.fact")
        } catch let error as ConfigurationFileError {
            #expect(error.key?.hasPrefix("apps[0].refundRequests") == true, "\(error)")
        }
    }
}

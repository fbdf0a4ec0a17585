import Foundation

/// The demo's audit: after the recovery, how right is the ledger? `audit` compares a random
/// sample of each App Store's accounts with Apple's answer field by field and states, at 95%
/// confidence, how large a share of the ledger's accounts can differ; it writes nothing.
enum DemoAudit {
    static let sample = 40

    static func run(config: String, reportDir: String, databaseURL: String) async throws {
        let arguments = ["audit", "--config", config, "--sample", String(sample), "--report-dir", "\(reportDir)/audit", "--no-progress"]
        print(
            "\nHow right is the ledger now? An audit asks Apple about \(sample) accounts of each App Store drawn at random, compares each "
                + "field by field, and bounds the share of all accounts that differ (exact binomial, 95%); it writes nothing "
                + "(--repair would mend what it finds):\n"
                + "  $ appstore-reconcile \(arguments.joined(separator: " "))"
        )
        let status = try await DemoDeployment.runTool(arguments, databaseURL: databaseURL)
        // 3: differences found and left as they are (the report names each).
        guard status == 0 || status == 3 else { throw DemoFailure("appstore-reconcile audit exited \(status)") }
    }
}

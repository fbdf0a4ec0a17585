import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import SignedData
import TestSupport
import ThrowawayPostgres
import Testing

/// `compensate` run as a user runs it (the built binary, the release build too), against the
/// simulator and a real PostgreSQL, after the outage was recovered with `run`.
@Suite("compensate on the command line")
struct CompensateCommandTests {
    static func extensions(_ directory: String) throws -> [[String: JSONValue]] {
        let json = try ImportCommandTests.reportJSON(directory)
        guard case .object(let compensation)? = json["compensation"], case .array(let entries)? = compensation["extensions"] else { return [] }
        return entries.compactMap { entry in
            guard case .object(let fields) = entry else { return nil }
            return fields
        }
    }

    @Test func aDryRunListsTheHurtThenTheRunExtendsEachOnceAndTheSameWindowAgainSendsNothing() async throws {
        let harness = try RecoveryHarness(customers: 30, seed: 93, environment: .production, outageHours: 30)
        let outage = try #require(harness.scenario.configuration.outage)
        let window = ["--start", String(Int64((outage.lowerBound.timeIntervalSince1970 * 1000).rounded(.down))), "--end", String(Int64((outage.upperBound.timeIntervalSince1970 * 1000).rounded(.up)))]
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let recovered = try await BuiltBinary.run(["run"] + RunCommandTests.window(harness) + ["--report-dir", scratch.appendingPathComponent("run").path, "--no-progress"], environment: environment)
            #expect(recovered.exitCode == 0, "\(recovered.combined)")

            let dryDirectory = scratch.appendingPathComponent("dry").path
            let dry = try await BuiltBinary.run(["compensate"] + window + ["--dry-run", "--report-dir", dryDirectory, "--no-progress"], environment: environment)
            #expect(dry.exitCode == 0, "\(dry.combined)")
            let listed = try Self.extensions(dryDirectory)
            // (A family member's share is listed and skipped: Apple extends it with the purchaser's.)
            #expect(!listed.isEmpty && listed.allSatisfy { $0["outcome"] == .string("would_extend") || $0["outcome"] == .string("skipped") }, "\(listed)")
            // Days: ceil(hours / 24) of the unrounded hours (the report rounds them to 0.1).
            #expect(listed.allSatisfy { entry in
                guard case .number(let hours)? = entry["hoursDenied"], case .number(let days)? = entry["extendByDays"] else { return false }
                return hours >= 1 && [max(1, ((hours - 0.05) / 24).rounded(.up)), max(1, ((hours + 0.05) / 24).rounded(.up))].contains(days)
            })
            #expect(harness.api.requestCounts["extendRenewalDate"] == nil, "a dry run sends nothing")
            #expect(try await ImportCommandTests.count(client, "SELECT count(*) FROM app_store.renewal_extensions") == 0)
            #expect(dry.standardOutput.contains("\(listed.count) hurt subscriptions"), "\(dry.standardOutput)")

            let realDirectory = scratch.appendingPathComponent("real").path
            let real = try await BuiltBinary.run(["compensate"] + window + ["--report-dir", realDirectory, "--no-progress"], environment: environment)
            let made = try Self.extensions(realDirectory)
            let refused = made.filter { $0["outcome"] == .string("refused") }
            #expect(Set(made.compactMap { $0["originalTransactionId"] }) == Set(listed.compactMap { $0["originalTransactionId"] }), "the dry run listed exactly who the run asked for")
            #expect(real.exitCode == (refused.isEmpty ? 0 : 3), "exit 3 when Apple refused any: \(real.combined)")
            #expect(harness.api.renewalExtensions.count == made.count { $0["outcome"] == .string("extended") })
            #expect(harness.api.requestCounts["extendRenewalDate"] == made.count { $0["outcome"] != .string("skipped") }, "the skipped were not sent")
            #expect(try await ImportCommandTests.count(client, "SELECT count(*) FROM app_store.renewal_extensions WHERE outcome = 'extended' AND reason_code = 3") == harness.api.renewalExtensions.count)
            #expect(try await ImportCommandTests.count(client, "SELECT count(*) FROM app_store.runs WHERE kind = 'compensate'") == 1)
            let html = try String(contentsOfFile: realDirectory + "/report.html", encoding: .utf8)
            #expect(html.contains("id=\"compensation\""))

            let sent = harness.api.requestCounts["extendRenewalDate"] ?? 0
            let again = try await BuiltBinary.run(["compensate"] + window + ["--report-dir", scratch.appendingPathComponent("again").path, "--no-progress"], environment: environment)
            #expect(again.exitCode == (refused.isEmpty ? 0 : 3), "Apple's refusals are still there: \(again.combined)")
            #expect(harness.api.requestCounts["extendRenewalDate"] ?? 0 == sent, "the same window again sends nothing")

            let usage = try await BuiltBinary.run(["compensate", "--all-active"] + window, environment: environment)
            #expect(usage.exitCode == 64, "--all-active needs --days: \(usage.combined)")
        }
    }
}

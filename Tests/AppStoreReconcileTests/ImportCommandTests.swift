import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres

/// `import` run as a user runs it (the built binary, the release build too), against the
/// simulator and a real PostgreSQL: each account named imported once and whole, unknown and
/// garbled lines reported, resumable by the input's content, receipts and order IDs, dry run.
@Suite("import on the command line")
struct ImportCommandTests {
    static func write(_ lines: [String], _ scratch: URL, _ name: String) throws -> String {
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let path = scratch.appendingPathComponent(name).path
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func count(_ client: PostgresClient, _ query: PostgresQuery) async throws -> Int {
        var value = 0
        for try await count in try await client.query(query).decode(Int.self) { value = count }
        return value
    }

    static func reportJSON(_ directory: String) throws -> [String: JSONValue] {
        try JSONDecoder().decode([String: JSONValue].self, from: Data(contentsOf: URL(fileURLWithPath: directory + "/report.json")))
    }

    /// Waits until the import has recorded `count` accounts (at most a minute: else the child is
    /// killed and the test fails).
    static func waitForImported(_ count: Int, _ client: PostgresClient, killing child: ChildProcess) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while try await Self.count(client, "SELECT count(*) FROM app_store.import_accounts") < count {
            guard ContinuousClock.now < deadline else {
                child.send(SIGKILL)
                _ = await child.waitAsync()
                throw ImportNotRecorded(count: count)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    struct ImportNotRecorded: Error { var count: Int }

    /// A transaction of the account other than its original one, when it has one.
    static func laterTransaction(_ customer: Scenario.Customer) -> String {
        customer.transactionVersions.compactMap(\.transaction.transactionId).last { $0 != customer.originalTransactionId } ?? customer.originalTransactionId
    }

    @Test func mixedIdsWithRepeatsImportEachAccountOnceUnknownAndGarbledLinesReported() async throws {
        let harness = try RecoveryHarness(customers: 10, seed: 91, environment: .production, outageHours: 20)
        let customers = harness.scenario.customers
        let withTwo = try #require(customers.first { $0.purchases.count > 1 })
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            // Each account by a later transaction, then again by its original one, by another of its
            // purchases, and by the very same line; an ID Apple does not know; a garbled line.
            var lines = ["# exported from our purchases table", ""]
            lines += customers.map(Self.laterTransaction)
            lines.append("9000000000000001")
            lines += customers.map(\.originalTransactionId)
            lines.append(try #require(withTwo.purchases.last?.originalTransactionId))
            lines.append("12ab34")
            lines.append(Self.laterTransaction(customers[0]))
            let input = try Self.write(lines, scratch, "ids.txt")
            let directory = scratch.appendingPathComponent("first").path
            let first = try await BuiltBinary.run(["import", "--transaction-ids", input, "--report-dir", directory, "--no-progress"], environment: environment)
            #expect(first.exitCode == 3, "unknown and garbled lines: \(first.combined)")
            #expect(harness.api.subscriptionStatusesRequests.count == customers.count, "each account asked about once")
            #expect(try await harness.mismatches(LedgerStore(client: client, logger: harness.logger)).isEmpty)
            let json = try Self.reportJSON(directory)
            guard case .object(let imported)? = json["import"], case .array(let problems)? = imported["problems"] else {
                Issue.record("report.json lacks import.problems")
                return
            }
            let named = problems.compactMap { problem -> Double? in
                guard case .object(let fields) = problem, case .number(let line)? = fields["line"] else { return nil }
                return line
            }
            #expect(named.sorted() == [Double(3 + customers.count), Double(lines.count - 1)], "the unknown ID's line and the garbled line: \(problems)")
            #expect(imported["repeats"] == .number(Double(customers.count + 2)))
            #expect(first.standardOutput.contains("lines \(lines.count) of \(lines.count)"), "\(first.standardOutput)")
            #expect(try await Self.count(client, "SELECT count(*) FROM app_store.import_accounts") == customers.count)

            #expect(try await Self.count(client, "SELECT count(*) FROM app_store.notifications") == 0, "an import invents no notification")

            // The same input again: it reads from its first line not imported (the unknown ID), reports
            // both lines again, and asks Apple only about that ID: the accounts after it are imported.
            let statuses = harness.api.subscriptionStatusesRequests.count
            let histories = harness.api.transactionHistoryRequests.count
            let againDirectory = scratch.appendingPathComponent("again").path
            let again = try await BuiltBinary.run(["import", "--transaction-ids", input, "--report-dir", againDirectory, "--no-progress"], environment: environment)
            #expect(again.exitCode == 3, "\(again.combined)")
            #expect(harness.api.subscriptionStatusesRequests.count == statuses)
            #expect(harness.api.transactionHistoryRequests.map(\.id).dropFirst(histories) == ["9000000000000001"], "only the unknown ID is asked again")
            guard case .object(let second)? = try Self.reportJSON(againDirectory)["import"] else {
                Issue.record("report.json lacks import")
                return
            }
            #expect(second["linesResumedPast"] == .number(Double(2 + customers.count)))
            #expect(second["linesNotImported"] == .number(2))
        }
    }

    /// Issue 67, point 4: a million junk lines (about 11 MB) gave 143 MB of reports, every line
    /// listed three times. Now the first 1,000 of each reason are listed and every line counted:
    /// each report stays under 2 MB and says that the rest are counted only; nothing is asked of
    /// Apple, and the command exits 3.
    @Test func aMillionJunkLinesGiveReportsOfAFewMegabytesThatCountEveryLine() async throws {
        let harness = try RecoveryHarness(customers: 2, seed: 93)
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            let input = scratch.appendingPathComponent("junk.txt").path
            var text = ""
            text.reserveCapacity(11_000_000)
            for index in 0..<1_000_000 { text += index % 2 == 0 ? "junk-line-\(index)\n" : "12ab\(index)\n" }
            try text.write(toFile: input, atomically: false, encoding: .utf8)
            let directory = scratch.appendingPathComponent("junk").path
            let result = try await BuiltBinary.run(["import", "--transaction-ids", input, "--report-dir", directory, "--no-progress"], environment: environment)
            #expect(result.exitCode == 3, "\(result.combined.prefix(2000))")
            #expect(result.standardOutput.contains("1000000 lines not imported"), "\(result.standardOutput.prefix(2000))")
            #expect(harness.api.subscriptionStatusesRequests.isEmpty && harness.api.transactionHistoryRequests.isEmpty)
            for name in ["report.json", "report.md", "report.html"] {
                let size = (try FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.size] as? Int) ?? .max
                print("a million junk lines: \(name) is \(size) bytes")
                #expect(size < 2_000_000, "\(name) is \(size) bytes")
            }
            guard case .object(let imported)? = try Self.reportJSON(directory)["import"], case .array(let problems)? = imported["problems"],
                case .object(let byReason)? = imported["linesNotImportedByReason"]
            else {
                Issue.record("report.json lacks import.problems or linesNotImportedByReason")
                return
            }
            #expect(imported["linesNotImported"] == .number(1_000_000))
            #expect(imported["problemsSampled"] == .bool(true))
            #expect(problems.count == 1_000, "one reason (not a transaction ID): its first 1,000 lines")
            #expect(byReason.values.reduce(0) { total, value in if case .number(let count) = value { total + count } else { total } } == 1_000_000)
            let markdown = try String(contentsOfFile: directory + "/report.md", encoding: .utf8)
            #expect(markdown.contains("the other 999000 are counted only"), "\(markdown.prefix(3000))")
            #expect(try await Self.count(client, "SELECT count(*) FROM app_store.notifications") == 0)
        }
    }

    @Test func linesOfOneAccountInFlightTogetherAskAboutItOnce() async throws {
        let harness = try RecoveryHarness(customers: 6, seed: 92, outageHours: 20)
        let customers = harness.scenario.customers
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            // Every transaction of each account, an account's lines together: eight at a time, the
            // lines after an account's first are in flight before it is written.
            let lines = customers.flatMap { customer in customer.transactionVersions.compactMap(\.transaction.transactionId).reduce(into: [String]()) { ids, id in
                if !ids.contains(id) { ids.append(id) }
            } }
            try #require(lines.count > 3 * customers.count)
            let input = try Self.write(lines, scratch, "ids.txt")
            let directory = scratch.appendingPathComponent("grouped").path
            let imported = try await BuiltBinary.run(["import", "--transaction-ids", input, "--report-dir", directory, "--no-progress"], environment: environment)
            #expect(imported.exitCode == 0, "\(imported.combined)")
            #expect(harness.api.subscriptionStatusesRequests.count == customers.count, "each account's statuses asked once")
            let pages = customers.reduce(0) { total, customer in
                total + max(1, (Set(customer.transactionVersions.compactMap(\.transaction.transactionId)).count + 19) / 20)
            }
            #expect(harness.api.transactionHistoryRequests.count <= pages + 7 * customers.count, "a line in flight beside its account's first spends one page at most")
            guard case .object(let fields)? = try Self.reportJSON(directory)["import"] else {
                Issue.record("report.json lacks import")
                return
            }
            #expect(fields["repeats"] == .number(Double(lines.count - customers.count)))
            #expect(try await harness.mismatches(LedgerStore(client: client, logger: harness.logger)).isEmpty)
        }
    }

    @Test func killedMidwayTheSameInputGoesOnAskingOnlyAboutTheRest() async throws {
        var options = SimulatorOptions()
        options.requestsPerSecond = 6
        let harness = try RecoveryHarness(customers: 16, seed: 93, outageHours: 20, options: options)
        let customers = harness.scenario.customers
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            let input = try Self.write(customers.map(Self.laterTransaction), scratch, "ids.txt")
            let arguments = ["import", "--transaction-ids", input, "--no-progress", "--concurrency", "2"]
            let killed = try BuiltBinary.start(arguments + ["--report-dir", scratch.appendingPathComponent("killed").path], environment: environment)
            try await Self.waitForImported(3, client, killing: killed)
            killed.send(SIGKILL)
            #expect(await killed.waitAsync() == 128 + SIGKILL)
            let imported = try await Self.count(client, "SELECT count(*) FROM app_store.import_accounts")
            #expect(imported < customers.count, "killed part-way")
            let asked = harness.api.subscriptionStatusesRequests.count

            let stopped = try BuiltBinary.start(arguments + ["--report-dir", scratch.appendingPathComponent("stopped").path], environment: environment)
            try await Self.waitForImported(imported + 2, client, killing: stopped)
            stopped.send(SIGTERM)
            #expect(await stopped.waitAsync() == 130, "SIGTERM stops after the accounts in hand")
            let importedBeforeTheEnd = try await Self.count(client, "SELECT count(*) FROM app_store.import_accounts")
            #expect(importedBeforeTheEnd < customers.count)
            // The stopped run asked only about accounts the killed one had not imported, and finished
            // each it asked about.
            #expect(harness.api.subscriptionStatusesRequests.count - asked == importedBeforeTheEnd - imported)
            let askedBeforeTheEnd = harness.api.subscriptionStatusesRequests.count

            let rest = try await BuiltBinary.run(arguments + ["--report-dir", scratch.appendingPathComponent("rest").path], environment: environment)
            #expect(rest.exitCode == 0, "\(rest.combined)")
            #expect(
                harness.api.subscriptionStatusesRequests.count - askedBeforeTheEnd == customers.count - importedBeforeTheEnd,
                "only the accounts not imported yet are asked about"
            )
            #expect(try await Self.count(client, "SELECT count(*) FROM app_store.import_accounts") == customers.count)
            #expect(try await harness.mismatches(LedgerStore(client: client, logger: harness.logger)).isEmpty)
        }
    }

    @Test func receiptsAndOrderIdsImportTheirAccountsAndOrderIdsAreRefusedInSandbox() async throws {
        let harness = try RecoveryHarness(customers: 8, seed: 95, environment: .production, outageHours: 20)
        let customers = harness.scenario.customers
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            // Half the accounts by the receipt their device held (both encodings), half by an order ID.
            let byReceipt = Array(customers.prefix(4))
            let byOrder = Array(customers.dropFirst(4))
            let receipts = try byReceipt.enumerated().map { index, customer in
                try harness.api.appReceipt(customer: customer.index, indefiniteLengths: index.isMultiple(of: 2))
            }
            let receiptFile = try Self.write(receipts + ["bm90IGEgcmVjZWlwdA=="], scratch, "receipts.txt")
            let fromReceipts = try await BuiltBinary.run(
                ["import", "--receipts", receiptFile, "--report-dir", scratch.appendingPathComponent("receipts").path, "--no-progress"], environment: environment
            )
            #expect(fromReceipts.exitCode == 3, "the last line is not a receipt: \(fromReceipts.combined)")
            #expect(try await harness.mismatches(LedgerStore(client: client, logger: harness.logger), accounts: byReceipt).isEmpty)
            #expect(!receipts.contains { fromReceipts.combined.contains(String($0.prefix(24))) }, "a receipt is not echoed")

            let orders = byOrder.map { harness.api.orderId(ofTransaction: Self.laterTransaction($0)) } + ["ZZZZZZZZZZ"]
            let orderFile = try Self.write(orders, scratch, "orders.txt")
            let fromOrders = try await BuiltBinary.run(
                ["import", "--order-ids", "-", "--report-dir", scratch.appendingPathComponent("orders").path, "--no-progress"],
                environment: environment, standardInput: try String(contentsOfFile: orderFile, encoding: .utf8)
            )
            #expect(fromOrders.exitCode == 3, "an order that is not the app's: \(fromOrders.combined)")
            #expect(harness.api.requestCounts["lookUpOrderId"] == orders.count)
            #expect(try await harness.mismatches(LedgerStore(client: client, logger: harness.logger), accounts: byOrder).isEmpty)
            let json = try Self.reportJSON(scratch.appendingPathComponent("orders").path)
            guard case .object(let imported)? = json["import"], case .array(let problems)? = imported["problems"] else {
                Issue.record("report.json lacks import.problems")
                return
            }
            #expect(problems.count == 1)
            #expect("\(problems)".contains("status 1"))
        }

        let sandbox = try RecoveryHarness(customers: 2, seed: 95, outageHours: 20)
        try await RunCommandTests.withSetup(sandbox, seed: false) { environment, _, scratch in
            let orderFile = try Self.write(["MK5TTTVWJH"], scratch, "orders.txt")
            let refused = try await BuiltBinary.run(["import", "--order-ids", orderFile, "--no-progress"], environment: environment)
            #expect(refused.exitCode == 64, "\(refused.combined)")
            #expect(refused.standardError.contains("Production only"))
            #expect(sandbox.api.requestCounts.isEmpty)
        }
    }

    @Test func aDryRunAsksAndWritesNothing() async throws {
        let harness = try RecoveryHarness(customers: 6, seed: 97, outageHours: 20)
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            let input = try Self.write(harness.scenario.customers.map(\.originalTransactionId), scratch, "ids.txt")
            let directory = scratch.appendingPathComponent("dry").path
            let dry = try await BuiltBinary.run(["import", "--transaction-ids", input, "--dry-run", "--report-dir", directory, "--no-progress"], environment: environment)
            #expect(dry.exitCode == 0, "\(dry.combined)")
            #expect(dry.standardOutput.contains("\(harness.scenario.customers.count) would change"), "\(dry.standardOutput)")
            for table in ["transactions", "subscriptions", "accounts", "imports", "import_accounts", "runs", "changes"] {
                #expect(try await Self.count(client, PostgresQuery(unsafeSQL: "SELECT count(*) FROM app_store.\(table)")) == 0, "\(table)")
            }
            #expect(try String(contentsOfFile: directory + "/report.md", encoding: .utf8).contains("Dry run: nothing was written"))

            // A path that cannot be read twice (here /dev/stdin, a pipe) is copied aside, not read empty.
            let piped = try await BuiltBinary.run(
                ["import", "--transaction-ids", "/dev/stdin", "--dry-run", "--report-dir", scratch.appendingPathComponent("piped").path, "--no-progress"],
                environment: environment, standardInput: try String(contentsOfFile: input, encoding: .utf8)
            )
            #expect(piped.exitCode == 0, "\(piped.combined)")
            #expect(piped.standardOutput.contains("\(harness.scenario.customers.count) would change"), "\(piped.standardOutput)")
        }
    }
}

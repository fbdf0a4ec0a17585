import AppStoreServerAPI
import Decisions
package import Foundation
import Ledger
import LedgerSupport
import Logging
import SignedData

/// `import`: takes the accounts an input names (transaction IDs, app receipts, order IDs) from
/// Apple, each once and whole, as a named repair does (Get All Subscription Statuses and every
/// page of Get Transaction History, verified, written as pass 2 writes), streaming the input.
///
/// Each account is asked about once: a line whose IDs the ledger already maps to an account this
/// import imported is a repeat, and is not sent to Apple; of two lines of one account the ledger
/// did not know, in flight together, the second stops after its first history page
/// (`AccountClaims`). The checkpoint (`app_store.imports`,
/// keyed by the input's content) moves as accounts finish, in input order, and never past a line
/// not imported: a run of the same input killed part-way goes on after the last line finished
/// (or from its first line not imported, reported again), without asking Apple about the
/// accounts it had imported. Memory stays flat: neither lines nor accounts are held (a dry run,
/// which writes nothing to ask the ledger about, remembers the accounts it checked, a few bytes
/// each).
///
/// A line the import's pair does not know (4040010) is asked about in the app's Sandbox pair
/// when one is configured beside a Production one (`ImportRoute`): App Review and TestFlight
/// purchases are Sandbox purchases of a production app. A receipt of another app, or of Xcode,
/// is a line not imported, named.
package struct CustomerImport: Sendable {
    package let repair: CustomerRepair
    /// The app's Sandbox pair, when the import runs in Production and the configuration has it.
    package let sandbox: CustomerRepair?
    package let now: @Sendable () -> Date

    package init(repair: CustomerRepair, sandbox: CustomerRepair? = nil, now: @escaping @Sendable () -> Date = { Date() }) {
        self.repair = repair
        self.sandbox = repair.pair.environment == .production ? sandbox : nil
        self.now = now
    }

    var store: LedgerStore { repair.store }
    var pair: AppStorePair { repair.pair }

    /// What an import did: its lines' fate, and the accounts' repairs.
    package struct Outcome: Sendable {
        package var result: ImportResult
        package var repairs: ReportList<RecoveryReport.Repair>?
    }

    /// Lines emitted and not yet finished, in order: their numbers and excerpts.
    private struct Line {
        var number: Int
        var excerpt: String
        var target: CustomerRepair.Target
        var route: ImportRoute
    }

    private final class InFlight {
        var lines: [Line] = []
        var head = 0

        func push(_ line: Line) { lines.append(line) }

        func pop() -> Line {
            let line = lines[head]
            head += 1
            if head > 1024 {
                lines.removeFirst(head)
                head = 0
            }
            return line
        }
    }

    /// Imports every account `input` names; a dry run writes nothing (no checkpoint either).
    package func run(_ input: ImportInput, dryRun: Bool, runId: UUID?) async throws -> Outcome {
        var result = try ImportResult(kind: input.kind, inputSHA256: input.sha256, linesTotal: input.lines)
        let checkpoint = dryRun
            ? nil : try await store.startImport(pair: pair, inputSHA256: input.sha256, kind: input.kind.rawValue, linesTotal: input.lines)
        result.linesResumedPast = checkpoint?.linesDone ?? 0
        let startedAt = now()
        let inFlight = InFlight()
        let lines = try input.readLines()
        var lastLine = result.linesResumedPast
        do {
            let repairs = try await repair.repair(
                dryRun: dryRun, runId: runId, handled: Handled(remembers: dryRun), claims: AccountClaims(),
                finished: { _, entry in
                    let line = inFlight.pop()
                    let found = try await inSandbox(line, after: entry, dryRun: dryRun, runId: runId, result: &result)
                    try await finish(line, found, dryRun: dryRun, input: input, result: &result)
                    report(result, startedAt: startedAt)
                    return found
                },
                produce: { emit in
                    while let (number, text) = try lines.next() {
                        // Stopped: no more lines; the accounts in hand finish.
                        if repair.stop.isRequested { return }
                        guard number > result.linesResumedPast else { continue }
                        lastLine = number
                        result.linesRead += 1
                        guard let (ids, route) = try await ids(number, text, kind: input.kind, result: &result) else { continue }
                        if !dryRun, !(try await store.importedAccounts(of: ids, pair: pair, inputSHA256: input.sha256)).isEmpty {
                            result.repeats += 1
                            continue
                        }
                        let id = ids[0]
                        let customer = try await store.customer(ofTransaction: id, pair: pair) ?? id
                        let target = CustomerRepair.Target(customer: customer, transactionId: id, reasons: [.imported])
                        inFlight.push(Line(number: number, excerpt: ImportLine.excerpt(text ?? ""), target: target, route: route))
                        result.accountsAsked += 1
                        try await emit(target)
                        report(result, startedAt: startedAt)
                    }
                }
            )
            if !dryRun { try await store.advanceImport(to: result.doneThrough(lastLine), finished: true, pair: pair, inputSHA256: input.sha256) }
            return Outcome(result: result, repairs: repairs)
        } catch is RunStopped {
            result.stopped = true
            return Outcome(result: result, repairs: nil)
        }
    }

    /// An account this pair does not know, asked about in the app's Sandbox pair when the line's
    /// route says so: the Sandbox pair's entry (marked), or `entry` as it was.
    private func inSandbox(
        _ line: Line, after entry: RecoveryReport.Repair?, dryRun: Bool, runId: UUID?, result: inout ImportResult
    ) async throws -> RecoveryReport.Repair? {
        guard let entry, entry.outcome == .failed, let sandbox, line.route.asksSandbox(afterAnswer: entry.appleAnswer) else { return entry }
        let customer = try await store.customer(ofTransaction: line.target.transactionId, pair: sandbox.pair) ?? line.target.transactionId
        let target = CustomerRepair.Target(customer: customer, transactionId: line.target.transactionId, reasons: [.imported])
        let repairs = try await sandbox.repair([target], dryRun: dryRun, runId: runId)
        guard var found = repairs.first(where: { _ in true }) else { return entry }
        found.environment = sandbox.pair.environment.rawValue
        if found.outcome == .failed {
            found.failure = "not in \(pair.environment.rawValue) (\(entry.failure ?? "unknown")), nor in Sandbox (\(found.failure ?? "unknown"))"
        } else {
            result.accountsFromSandbox += 1
        }
        return found
    }

    /// The IDs a line gives to ask Apple with and where, or nil (a blank line, or a problem recorded).
    private func ids(_ number: Int, _ text: Substring?, kind: ImportKind, result: inout ImportResult) async throws -> ([String], ImportRoute)? {
        guard let text else {
            result.add(ImportProblem(line: number, value: "", reason: "a line longer than \(ImportLine.maximumLength) bytes"))
            return nil
        }
        switch ImportLine.parse(text, kind: kind, pair: pair, sandboxPair: sandbox != nil) {
        case .skip:
            return nil
        case .garbled(let reason):
            result.add(ImportProblem(line: number, value: ImportLine.excerpt(text), reason: reason))
            return nil
        case .transactionIds(let ids, let route):
            return (ids, route)
        case .orderId(let orderId):
            result.orderLookups += 1
            do {
                let ids = try await repair.orderTransactionIds(orderId)
                if ids.isEmpty { result.add(ImportProblem(line: number, value: orderId, reason: "Apple answers the order ID is invalid for this app (status 1)")) }
                // An order is Production's, and so are the IDs Apple gives for it.
                return ids.isEmpty ? nil : (ids, .thisPair(orSandbox: false))
            } catch let error as AppStoreAPIError where error.httpStatus == 400 || error.httpStatus == 404 {
                result.add(ImportProblem(line: number, value: orderId, reason: "Apple refused the order ID: \(error.code.map { "\($0.rawValue)" } ?? "\(error.httpStatus)")"))
                return nil
            } catch let rejection as OrderNotVerified {
                result.add(ImportProblem(line: number, value: orderId, reason: rejection.description + ": not imported"))
                return nil
            }
        }
    }

    /// An account done, in input order: its problem, or its checkpoint.
    private func finish(
        _ line: Line, _ entry: RecoveryReport.Repair?, dryRun: Bool, input: ImportInput, result: inout ImportResult
    ) async throws {
        // No entry: another line of the same account, in flight beside it, had it.
        if entry == nil { result.repeats += 1 }
        if let entry, entry.outcome == .failed {
            result.add(ImportProblem(line: line.number, value: line.excerpt, reason: entry.failure ?? "Apple could not answer for the account"))
        }
        guard !dryRun else { return }
        let imported = entry.flatMap { $0.outcome == .failed ? nil : ($0.members.first ?? $0.originalTransactionId) }
        let doneThrough = result.doneThrough(line.number)
        if let imported {
            let new = try await store.recordImported(customer: imported, line: line.number, doneThrough: doneThrough, pair: pair, inputSHA256: input.sha256)
            if !new { result.repeats += 1 }
        } else {
            try await store.advanceImport(to: doneThrough, finished: false, pair: pair, inputSHA256: input.sha256)
        }
    }

    /// The progress line: lines done of the total, their rate and the time left.
    private func report(_ result: ImportResult, startedAt: Date) {
        let done = result.linesResumedPast + result.linesRead
        let elapsed = max(now().timeIntervalSince(startedAt), 0.001)
        let rate = Double(result.linesRead) / elapsed
        let left = rate > 0 ? Double(result.linesTotal - done) / rate : 0
        let eta = left >= 3600 ? String(format: "%.1f h", left / 3600) : left >= 60 ? String(format: "%.0f min", left / 60) : String(format: "%.0f s", left)
        repair.progress.update(
            "lines \(done) of \(result.linesTotal) · accounts \(result.accountsAsked) · \(String(format: "%.1f", rate)) lines/s · ETA \(eta)",
            requests: repair.client.counts.requests.values.reduce(0, +)
        )
    }
}

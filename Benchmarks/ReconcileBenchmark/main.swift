// appstore-reconcile's benchmarks: every figure a ratio measured in this one run, or a count.
//
//   ./scripts/bench                      # builds in release mode and runs all of it
//   reconcile-benchmark [--seconds N] [--sizes 10000,100000] [--million] [--skip-apple] [--skip-end-to-end]
//                       [--skip-serve] [--serve-seconds N] [--serve-connections 32,256] [--serve-latencies DIR]
//                       [--compare-with OTHER-BINARY] [--pass-one-only] [--compare-serve-with OTHER-BINARY [--serve-rounds 2]]
//
// 1. Verification against its ceiling: swift-crypto P-256 verifications per CPU-second beside
//    full notification verifications (three signatures each). Target: full ≥ 60% of ceiling ÷ 3.
// 2. Against Apple's library: the same notifications verified by app-store-server-library
//    (Python, PyPI, in a virtual environment made here). Target: ≥ 35× its throughput.
// 3. End to end: `appstore-reconcile run` over simulated outages (a third missed), pass 1
//    notifications/s, pass 2 customers/s, CPU seconds per 1,000 notifications, peak memory, and
//    what the run added to the ledger per notification it recorded (table bytes: heap, TOAST,
//    indexes; WAL bytes) with PostgreSQL's CPU per notification (targets: ≤ 7 KB, WAL ≤ 8 KB).
//    Targets: ≥ 3,000 notifications/s through pass 1; peak memory at the largest size within
//    1.2× of the smallest's.
// 4. Requests to Apple against the fewest the plan can take (QueryPlan: each priority query's
//    pages, Σ⌈nᵢ/20⌉, then the unfiltered pass over all N, ⌈N/20⌉; target: within 5%); pass 2's requests per account checked (target: ≤ 2, one statuses call and at most one
//    transaction-history page); accounts checked vs accounts whose rows changed; and how long the
//    run's requests take at Apple's Production limit of 50 requests/s per endpoint.
// 5. Under a simulated 50 requests/s limit: achieved rate and 429s. Target: ≥ 90% of the limit,
//    no 429 after the first second.
// 7. `serve` against a receiver on Apple's Python library (gunicorn, one sync worker per core,
//    psycopg), same PostgreSQL, distinct notifications each with nested transaction and renewal
//    info: sustained notifications/s answered 200 (committed) in closed loops of 32 and 256
//    connections (wrk when installed), the CPU each side and its PostgreSQL took per notification,
//    p50/p99 at half the best rate, and `serve` at 500/s. Targets: ≥ 10× the receiver's rate;
//    p99 < 50 ms at 500/s. `--serve-latencies DIR` keeps each open-loop phase's latencies,
//    request by request, to see when a slow stretch came. wrk's list of notifications is written
//    to /dev/shm (memory) when it has room for it, not to the disk the database writes to.
// 6. With --compare-with OTHER-BINARY: that build's `run` and this one's, alternately, twice each,
//    every notification missed, into an empty ledger each build's own `migrate` made: pass 1/s,
//    CPU, PostgreSQL's CPU-ms and the ledger's bytes and WAL per notification.
// 8. With --compare-serve-with OTHER-BINARY: that build's `serve` and this one's, alternately, twice
//    each, each round in a fresh database its own `migrate` made: closed-loop rate and CPU-ms per
//    notification, p50/p99 at 500/s, and peak memory under a flood of 10,000 garbage POSTs from
//    1,000 clients that give up after 1 s while the ledger is locked for 30 s, and the ledger's
//    bytes and WAL per notification recorded. Targets: rate ≥ 95% of the other build's; flood
//    peak < 400 MiB. Only the serve parts:
//      reconcile-benchmark --skip-apple --skip-end-to-end --skip-serve --compare-serve-with OTHER
// 9. With --deployment [--deployment-customers 200] [--deployment-rounds 2], and nothing else: one
//    recovery over two apps in Production and Sandbox by `run --config`, the four App Stores side
//    by side against one after the other, alternately, at Apple's rates (50/s per endpoint per app
//    in Production, 5/s in Sandbox; the simulator enforces them): wall seconds of each, and the
//    time their requests take at Apple's limits (the slowest App Store's against the sum).
// 11. With --serve-attack [--serve-attack-rounds 1], and nothing else: issue 53's attacks on
//    `serve` (ServeAttack), its defaults against its bounds moved out of the way, alternately:
//    1,000 pipelining readers that never read, 1,000 body drips on /livez, 20 s of distinct
//    garbage and of tampered copies from 64 connections, 1,000 malleated copies of another app's
//    notification. Targets: readers and drips closed, serve < 300 MiB, a genuine notification
//    answered 200 within 2 s; each flood leaves the ledger < 5 MiB and the log < 1 MiB;
//    the malleated copies at most one row.
// 12. With --import [--import-accounts 1000] [--import-memory-accounts 200], and nothing else:
//    issue 51's `import --transaction-ids` at Apple's Production limit (ImportRuns): requests per
//    account against the history pages it needs (goal ≤ 1.2 × pages + 1), the share of the busier
//    endpoint's limit used (goal ≥ 90%), CPU-ms per account; peak memory importing the same accounts
//    from 10,000 and 100,000 lines (goal: flat, ≤ 1.2×).
// 13. With --overdue [--overdue-subscriptions 1000000], and nothing else: issue 64's overdue query
//    on a ledger of a million subscriptions (OverdueAtScale): serve's and status's count and the
//    view's, median times and the plan's blocks (goal: an index range scan, < 100 ms), and
//    migrate's fill of what older rows owe, per 1,000 rows.
// 14. With --metrics [--metrics-subscriptions 1000000], and nothing else: issue 65's `metrics` for a
//    year by day on ledgers of 100,000 and a million subscriptions made by SQL (MetricsAtScale):
//    the command's wall time (goal ≤ 30 s at a million) and peak memory (goal: flat, ≤ 1.2×).

import AppStoreSimulator
import Foundation
import Logging
import SignedData

let arguments = CommandLine.arguments
func option(_ name: String) -> String? { arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil } }
let verificationSeconds = option("--seconds").flatMap(Double.init) ?? 3
var sizes = (option("--sizes") ?? "10000,100000").split(separator: ",").compactMap { Int($0) }
if arguments.contains("--million") { sizes.append(1_000_000) }
let root = FileManager.default.currentDirectoryPath
let binary = URL(fileURLWithPath: arguments[0]).deletingLastPathComponent().appendingPathComponent("appstore-reconcile").path
var logger = Logger(label: "reconcile-benchmark")
logger.logLevel = .error

var rows: [Row] = []
/// `--pass-one-only`: parts 3 and 6 run `run --skip-repair`, so that their CPU and PostgreSQL
/// figures are pass 1's alone.
let passOneOnly = arguments.contains("--pass-one-only")

/// A failed part is reported, not a crash; the table shows what was measured.
@MainActor func attempt(_ part: String, _ body: () async throws -> Void) async {
    do { try await body() } catch {
        say("   \(part) failed: \(error)")
        rows.append(Row(section: part, figure: "not measured: \(String(describing: error).prefix(100))", value: "-", met: false))
    }
}

if arguments.contains("--deployment") {
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        say("error: \(binary) not found: build it first (swift build -c release --product appstore-reconcile)")
        exit(1)
    }
    await attempt("four App Stores") {
        rows += try await DeploymentRuns(binary: binary, logger: logger).measure(
            customers: option("--deployment-customers").flatMap(Int.init) ?? 200, rounds: option("--deployment-rounds").flatMap(Int.init).map { max(1, $0) } ?? 2)
    }
    printTable(rows)
    exit(0)
}

if arguments.contains("--import") {
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        say("error: \(binary) not found: build it first (swift build -c release --product appstore-reconcile)")
        exit(1)
    }
    await attempt("import") {
        rows += try await ImportRuns(binary: binary, logger: logger).measure(
            accounts: option("--import-accounts").flatMap(Int.init) ?? 1000, memoryAccounts: option("--import-memory-accounts").flatMap(Int.init) ?? 200)
    }
    printTable(rows)
    exit(0)
}

if arguments.contains("--overdue") {
    say("13. What Apple owes, on a ledger of \(option("--overdue-subscriptions") ?? "1000000") subscriptions…")
    await attempt("overdue") {
        var scale = OverdueAtScale(logger: logger)
        if let count = option("--overdue-subscriptions").flatMap(Int.init), count >= 1_000 { scale.subscriptions = count }
        rows += try await scale.measure()
    }
    printTable(rows)
    exit(0)
}

if arguments.contains("--metrics") {
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        say("error: \(binary) not found: build it first (swift build -c release --product appstore-reconcile)")
        exit(1)
    }
    say("14. metrics for a year by day, on ledgers of 100,000 and \(option("--metrics-subscriptions") ?? "1000000") subscriptions…")
    await attempt("metrics") {
        var scale = MetricsAtScale(binary: binary, logger: logger)
        if let count = option("--metrics-subscriptions").flatMap(Int.init), count >= 1_000 { scale.sizes = [min(100_000, count), count] }
        rows += try await scale.measure()
    }
    printTable(rows)
    exit(0)
}

if arguments.contains("--serve-attack") {
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        say("error: \(binary) not found: build it first (swift build -c release --product appstore-reconcile)")
        exit(1)
    }
    say("11. serve under issue 53's attacks…")
    await attempt("serve attacked") {
        var attack = ServeAttack(root: root, binary: binary, logger: logger)
        attack.rounds = option("--serve-attack-rounds").flatMap(Int.init).map { max(1, $0) } ?? 1
        rows += ServeAttack.rows(try await attack.run(), attack)
    }
    printTable(rows)
    exit(0)
}

say("1. Verification against its ceiling (\(number(verificationSeconds)) s each)…")
let figures = try VerificationFigures()
let ceiling = await VerificationFigures.ceiling(seconds: verificationSeconds)
let full = try await figures.full(seconds: verificationSeconds)
let ratio = full.perCPUSecond / (ceiling.perCPUSecond / 3)
rows.append(Row(section: "verification", figure: "P-256 verifications per CPU-second (ceiling)", value: number(ceiling.perCPUSecond)))
rows.append(Row(section: "verification", figure: "full notifications per CPU-second (3 signatures)", value: number(full.perCPUSecond)))
rows.append(Row(section: "verification", figure: "full ÷ (ceiling ÷ 3)", value: number(ratio * 100, 1) + "%", target: "≥ 60%", met: ratio >= 0.6))

/// Apple's library's full notifications verified per CPU-second (part 2), for part 3's dry run.
var appleFullPerCPUSecond: Double?
if !arguments.contains("--skip-apple") {
    say("2. Apple's App Store Server Library (Python) on the same notifications…")
    do {
        let apple = try AppleLibrary.measure(figures, root: root, seconds: verificationSeconds)
        appleFullPerCPUSecond = apple.fullPerCPUSecond
        let times = full.perCPUSecond / apple.fullPerCPUSecond
        rows.append(Row(section: "vs Apple's library", figure: "app-store-server-library \(AppleLibrary.version): full notifications per CPU-second", value: number(apple.fullPerCPUSecond)))
        rows.append(Row(section: "vs Apple's library", figure: "app-store-server-library: single payloads per CPU-second", value: number(apple.singlePerCPUSecond)))
        rows.append(Row(section: "vs Apple's library", figure: "appstore-reconcile ÷ Apple's library (full notifications)", value: number(times, 1) + "×", target: "≥ 35×", met: times >= 35))
        rows.append(Row(section: "vs Apple's library", figure: "appstore-reconcile full notifications per CPU-second", value: number(full.perCPUSecond), target: "≥ 5,000", met: full.perCPUSecond >= 5000))
    } catch {
        say("   could not measure Apple's library: \(error)")
        rows.append(Row(section: "vs Apple's library", figure: "not measured: \(String(describing: error).prefix(80))", value: "-", target: "≥ 35×", met: false))
    }
}

if !arguments.contains("--skip-end-to-end") {
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        say("error: \(binary) not found: build it first (swift build -c release --product appstore-reconcile)")
        exit(1)
    }
    let endToEnd = EndToEnd(binary: binary, logger: logger)
    var results: [EndToEnd.Result] = []
    for size in sizes {
        say("3. End to end, about \(size) notifications…")
        var measured: EndToEnd.Result?
        await attempt("end to end") { measured = try await endToEnd.run(EndToEnd.scenario(notifications: size), skipRepair: passOneOnly) }
        guard let result = measured else { continue }
        results.append(result)
        let label = "\(result.notifications) notifications, \(result.customers) customers"
        rows.append(Row(section: "end to end", figure: "\(label): missed / applied", value: "\(result.missed) / \(result.applied)"))
        rows.append(Row(section: "end to end", figure: "\(label): pass 1 notifications/s", value: number(result.passOnePerSecond), target: "≥ 3,000", met: result.passOnePerSecond >= 3000))
        rows.append(Row(section: "end to end", figure: "\(label): pass 2 accounts/s (\(result.customersChecked) checked)", value: number(result.passTwoPerSecond)))
        rows.append(Row(section: "end to end", figure: "\(label): CPU seconds per 1,000 notifications (whole run)", value: number(result.cpuPerThousand, 3)))
        rows.append(
            Row(
                section: "end to end", figure: "\(label): same run, CPU-s per 1,000 of the simulator / of PostgreSQL and the rest",
                value: number(result.simulatorPerThousand, 3) + " / " + number(result.restPerThousand, 3)
            )
        )
        rows.append(Row(section: "end to end", figure: "\(label): peak resident memory", value: number(Double(result.peakResidentBytes) / 1_048_576, 1) + " MiB"))
        rows.append(
            Row(section: "end to end", figure: "\(label): the ledger per notification the run recorded: tables; WAL", value: result.ledger.text,
                target: "≤ 7 KB; WAL ≤ 8 KB", met: result.ledger.tables <= 7000 && result.ledger.wal <= 8000))
        rows.append(Row(section: "end to end", figure: "\(label): PostgreSQL CPU-ms per notification the run recorded", value: number(result.postgresCPUPerNotification, 3)))
        rows.append(
            Row(
                section: "end to end", figure: "\(label): report.html / report.json / report.md, written in the same run (\(result.missed) missed)",
                value: [result.reportBytes.html, result.reportBytes.json, result.reportBytes.markdown].map { number(Double($0) / 1024, 0) + " KiB" }.joined(separator: " / ")
            )
        )
        if let apple = appleFullPerCPUSecond {
            // The whole dry run (start-up, both passes, the report) against what Apple's library
            // spends only verifying the notifications the run fetched, at part 2's rate.
            say("   the same world, run --dry-run…")
            await attempt("dry run") {
                let dry = try await endToEnd.run(EndToEnd.scenario(notifications: size), dryRun: true)
                let appleSeconds = Double(dry.fetched) / apple
                let times = appleSeconds / dry.cpuSeconds
                rows.append(
                    Row(
                        section: "end to end",
                        figure: "\(label): run --dry-run, the tool's whole CPU (\(number(dry.cpuSeconds, 2)) s) vs Apple's library only verifying the \(dry.fetched) fetched (\(number(appleSeconds, 2)) s)",
                        value: number(times, 1) + "× less", target: "≥ 15×", met: times >= 15))
            }
            // Pass 1 alone (--skip-repair): the same comparison without pass 2's accounts, which
            // the other side does not check, to show where the whole dry run's CPU goes.
            await attempt("dry run, pass 1 alone") {
                let dry = try await endToEnd.run(EndToEnd.scenario(notifications: size), skipRepair: true, dryRun: true)
                let appleSeconds = Double(dry.fetched) / apple
                rows.append(
                    Row(
                        section: "end to end",
                        figure: "\(label): run --dry-run --skip-repair (pass 1 alone), the tool's CPU (\(number(dry.cpuSeconds, 2)) s) vs Apple's library only verifying the \(dry.fetched) fetched",
                        value: number(appleSeconds / dry.cpuSeconds, 1) + "× less"))
            }
        }
        let overBound = Double(result.historyRequests) / Double(result.requestBound) - 1
        rows.append(
            Row(
                section: "requests", figure: "\(result.fetched) notifications: history requests vs the plan's fewest, Σ⌈nᵢ/20⌉ over \(result.priorityQueries) priority queries + ⌈N/20⌉ (remainder \(result.remainder))",
                value: "\(result.historyRequests) vs \(result.requestBound) (\(number(overBound * 100, 1))%)", target: "within 5%", met: overBound <= 0.05
            )
        )
        rows.append(
            Row(
                section: "requests",
                figure: "\(result.customersChecked) accounts checked: pass 2 requests per account (\(result.statusesRequests) statuses + \(result.transactionHistoryRequests) transaction history)",
                value: number(result.passTwoRequestsPerAccount, 2), target: "≤ 2", met: result.passTwoRequestsPerAccount <= 2
            )
        )
        rows.append(Row(section: "requests", figure: "\(label): accounts checked / accounts whose rows changed", value: "\(result.customersChecked) / \(result.customersRepaired)"))
        // Issue 64, point 3: what each rule costs and finds (an account two rules select counts under both).
        for (reason, count) in result.repairReasons.sorted(by: { $0.key < $1.key }) {
            let perChanged = count.changed == 0 ? "none changed" : number(Double(count.selected) / Double(count.changed), 1) + " checked per changed"
            rows.append(Row(section: "requests", figure: "\(label): pass 2 rule \(reason): accounts selected / changed", value: "\(count.selected) / \(count.changed) (\(perChanged))"))
        }
        rows.append(
            Row(
                section: "requests", figure: "\(label): time its requests take at Apple's limit (50/s per endpoint)",
                value: number(result.secondsAtApplesLimit, 1) + " s"
            )
        )
    }
    if let smallest = results.first, let largest = results.last, results.count > 1 {
        let growth = Double(largest.peakResidentBytes) / Double(smallest.peakResidentBytes)
        rows.append(Row(section: "end to end", figure: "peak memory at \(largest.notifications) ÷ at \(smallest.notifications)", value: number(growth, 2) + "×", target: "≤ 1.2×", met: growth <= 1.2))
        let timeGrowth = (largest.passOneSeconds / Double(largest.fetched)) / (smallest.passOneSeconds / Double(smallest.fetched))
        rows.append(Row(section: "end to end", figure: "pass 1 seconds per notification at \(largest.notifications) ÷ at \(smallest.notifications)", value: number(timeGrowth, 2) + "× (1 = linear)"))
    }

    say("5. Under a simulated limit of 50 requests/s (Production)…")
    var limited = SimulatorOptions()
    limited.requestsPerSecond = 50
    var measured: EndToEnd.Result?
    await attempt("rate limit") {
        measured = try await endToEnd.run(EndToEnd.scenario(notifications: 25_000, environment: .production), options: limited, rateFactor: 1, skipRepair: true)
    }
    if let rate = measured {
    let achieved = Double(rate.historyRequests) / rate.passOneSeconds
    rows.append(Row(section: "rate limit", figure: "\(rate.historyRequests) history requests in \(number(rate.passOneSeconds, 1)) s: achieved rate", value: number(achieved, 1) + "/s", target: "≥ 45/s (90%)", met: achieved >= 45))
    let late = rate.lastRateLimitedAfter.map { $0 > 1 } ?? false
    rows.append(Row(section: "rate limit", figure: "429 answers (after the first second)", value: "\(rate.rateLimited) (\(late ? "yes, last at \(number(rate.lastRateLimitedAfter!, 1)) s" : "none"))", target: "none after 1 s", met: !late))
    }
}

// Before/after: the same worlds through another build of `appstore-reconcile` (say, the commit
// before a refactoring) and this one, alternately, twice each, in this one run.
if let other = option("--compare-with") {
    guard FileManager.default.isExecutableFile(atPath: other), FileManager.default.isExecutableFile(atPath: binary) else {
        say("error: --compare-with \(other) or \(binary) is not an executable")
        exit(1)
    }
    for size in sizes {
        var byBinary: [String: [EndToEnd.Result]] = [:]
        for round in 0..<4 {
            let (name, path) = round.isMultiple(of: 2) ? ("compared", other) : ("this build", binary)
            say("6. Before/after, about \(size) notifications, \(name) (round \(round / 2 + 1) of 2)…")
            await attempt("before/after") {
                // Every notification missed, into an empty ledger each build's own migrate made.
                byBinary[name, default: []].append(
                    try await EndToEnd(binary: path, logger: logger).run(
                        EndToEnd.scenario(notifications: size, missedShare: 1), skipRepair: passOneOnly, prefill: false))
            }
        }
        for name in ["compared", "this build"] {
            for result in byBinary[name] ?? [] {
                rows.append(
                    Row(
                        section: "before/after", figure: "\(result.notifications) notifications, \(name): pass 1/s, pass 2 accounts/s, CPU-s per 1,000, PostgreSQL CPU-ms per notification, peak MiB, missed/applied, requests",
                        value: "\(number(result.passOnePerSecond)), \(number(result.passTwoPerSecond)), \(number(result.cpuPerThousand, 3)), \(number(result.postgresCPUPerNotification, 3)), \(number(Double(result.peakResidentBytes) / 1_048_576, 1)), \(result.missed)/\(result.applied), \(result.historyRequests)+\(result.statusesRequests)+\(result.transactionHistoryRequests)"
                    )
                )
                rows.append(Row(section: "before/after", figure: "\(result.notifications) notifications, \(name): the ledger per notification", value: result.ledger.text))
            }
        }
    }
}

if !arguments.contains("--skip-serve") {
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        say("error: \(binary) not found: build it first (swift build -c release --product appstore-reconcile)")
        exit(1)
    }
    let serveSeconds = option("--serve-seconds").flatMap(Double.init) ?? 8
    say("7. serve against a receiver on Apple's Python library (\(number(serveSeconds)) s per phase)…")
    await attempt("serve") {
        let connections = option("--serve-connections").map { $0.split(separator: ",").compactMap { Int($0) } } ?? [32, 256]
        guard !connections.isEmpty, connections.allSatisfy({ $0 >= 1 }) else {
            throw BenchmarkError("--serve-connections takes counts of 1 or more, separated by commas (e.g. 32,256)")
        }
        var comparison = ServeComparison(binary: binary, root: root, seconds: serveSeconds, connections: connections, logger: logger)
        if let directory = option("--serve-latencies") {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            comparison.latencies = directory
        }
        let result = try await comparison.run(fixedRate: 500)
        let workers = ProcessInfo.processInfo.activeProcessorCount
        for (index, count) in connections.enumerated() {
            let (serve, receiver) = (result.serve[index], result.receiver[index])
            let times = serve.perSecond / receiver.perSecond
            rows.append(
                Row(
                    section: "serve",
                    figure: "\(count) connections (\(result.generator)): serve / Apple's library \(AppleLibrary.version) + psycopg under gunicorn (\(workers) workers), notifications/s answered 200 (\(serve.refused) / \(receiver.refused) not 200)",
                    value: "\(number(serve.perSecond)) / \(number(receiver.perSecond))"
                )
            )
            rows.append(Row(section: "serve", figure: "\(count) connections: serve ÷ the receiver on Apple's library", value: number(times, 1) + "×", target: "≥ 10×", met: times >= 10))
            // Where the CPU went: the receiver, its database and the rest of the machine (the load
            // generator among it), per notification answered 200.
            for (name, cost) in [("serve", serve.cost), ("the receiver", receiver.cost)] {
                rows.append(
                    Row(
                        section: "serve",
                        figure: "\(count) connections: \(name), CPU ms per notification (itself / PostgreSQL / the rest: load generator, its set-up, others)",
                        value: "\(number(cost.receiver, 3)) / \(number(cost.database, 3)) / \(number(cost.rest, 3))"
                    )
                )
            }
            rows.append(
                Row(
                    section: "serve", figure: "\(count) connections: CPU to record one notification (itself + PostgreSQL), the receiver's ÷ serve's",
                    value: number(receiver.cost.recording / serve.cost.recording, 1) + "×"
                )
            )
        }
        for (name, latency) in [("serve", result.serveAtHalf), ("the receiver", result.receiverAtHalf)] {
            rows.append(
                Row(
                    section: "serve", figure: "\(name) at half its rate (\(number(latency.rate))/s, \(latency.sent) sent, \(latency.refused) not 200): p50 / p99",
                    value: "\(number(latency.p50 * 1000, 1)) / \(number(latency.p99 * 1000, 1)) ms"
                )
            )
        }
        if let fixed = result.serveAtFixed {
            rows.append(
                Row(
                    section: "serve", figure: "serve at \(number(fixed.rate))/s (\(fixed.sent) sent, \(fixed.refused) not 200): p50 / p99",
                    value: "\(number(fixed.p50 * 1000, 1)) / \(number(fixed.p99 * 1000, 1)) ms", target: "p99 < 50 ms", met: fixed.p99 < 0.05 && fixed.refused == 0
                )
            )
        }
        rows.append(Row(section: "serve", figure: "rows committed: serve's ledger / the receiver's table", value: "\(result.committed.serve) / \(result.committed.receiver)"))
    }
}

// serve before/after: another build's `serve` (say, before its limits) and this one's, alternately,
// twice each, each round in a fresh database: closed loops, p50/p99 at 500/s, and a flood's peak
// memory.
if let other = option("--compare-serve-with") {
    guard FileManager.default.isExecutableFile(atPath: other), FileManager.default.isExecutableFile(atPath: binary) else {
        say("error: --compare-serve-with \(other) or \(binary) is not an executable")
        exit(1)
    }
    say("8. serve before/after: \(other) and this build, alternately…")
    await attempt("serve before/after") {
        let connections = option("--serve-connections").map { $0.split(separator: ",").compactMap { Int($0) } } ?? [32, 256]
        var comparison = ServeBeforeAfter(
            builds: [.init(name: "compared", binary: other), .init(name: "this build", binary: binary)], root: root,
            seconds: option("--serve-seconds").flatMap(Double.init) ?? 8, connections: connections, fixedRate: 500, logger: logger)
        comparison.rounds = option("--serve-rounds").flatMap(Int.init).map { max(1, $0) } ?? 2
        let rounds = try await comparison.run()
        func mib(_ bytes: Int) -> String { number(Double(bytes) / 1_048_576, 1) }
        for round in rounds {
            for (index, count) in connections.enumerated() {
                let loop = round.loops[index]
                rows.append(
                    Row(
                        section: "serve before/after", figure: "\(round.build), \(count) connections: notifications/s answered 200, serve / PostgreSQL CPU-ms per notification (not 200)",
                        value: "\(number(loop.perSecond)), \(number(loop.cost.receiver, 3)) / \(number(loop.cost.database, 3)) (\(loop.refused))"))
            }
            rows.append(
                Row(
                    section: "serve before/after", figure: "\(round.build), at \(number(round.fixed.rate))/s: p50 / p99 (not 200), peak RSS",
                    value: "\(number(round.fixed.p50 * 1000, 1)) / \(number(round.fixed.p99 * 1000, 1)) ms (\(round.fixed.refused)), \(mib(round.peakResidentBytes)) MiB"))
            let flood = round.flood
            rows.append(
                Row(
                    section: "serve before/after",
                    figure: "\(round.build), flood of \(comparison.floodRequests) garbage POSTs during a \(number(comparison.lockSeconds)) s lock: peak RSS; 400 / 503 / given up / other",
                    value: "\(mib(flood.peakResidentBytes)) MiB; \(flood.answered400) / \(flood.answered503) / \(flood.unanswered) / \(flood.other)"))
            rows.append(Row(section: "serve before/after", figure: "\(round.build): the ledger per notification recorded", value: round.ledger.text))
        }
        // This build against the compared one: the mean of each build's rounds.
        func mean(_ build: String, _ figure: (ServeBeforeAfter.Round) -> Double) -> Double {
            let values = rounds.filter { $0.build == build }.map(figure)
            return values.reduce(0, +) / Double(max(1, values.count))
        }
        for (index, count) in connections.enumerated() {
            let rate = mean("this build") { $0.loops[index].perSecond } / mean("compared") { $0.loops[index].perSecond }
            let cpu = mean("this build") { $0.loops[index].cost.receiver } / mean("compared") { $0.loops[index].cost.receiver }
            rows.append(
                Row(
                    section: "serve before/after", figure: "\(count) connections, this build ÷ compared: notifications/s, serve's CPU-ms per notification",
                    value: "\(number(rate, 3)), \(number(cpu, 3))", target: "rate ≥ 0.95", met: rate >= 0.95))
        }
        let p99 = mean("this build") { $0.fixed.p99 } / mean("compared") { $0.fixed.p99 }
        rows.append(Row(section: "serve before/after", figure: "p99 at 500/s, this build ÷ compared", value: number(p99, 3)))
        let peak = rounds.filter { $0.build == "this build" }.map(\.flood.peakResidentBytes).max() ?? 0
        rows.append(
            Row(
                section: "serve before/after", figure: "flood: this build's highest peak RSS", value: "\(mib(peak)) MiB", target: "< 400 MiB",
                met: peak > 0 && peak < 400 * 1_048_576))
    }
}

printTable(rows)

import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import Ledger
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SwiftASN1
import ThrowawayPostgres
import X509

/// `serve` of two builds (say, before and after its limits), alternately, in one session: each
/// round starts a fresh PostgreSQL cluster, lets that build's own `migrate` make its schema, and
/// sends the same notifications, so the rounds differ only by the build and the machine's noise.
/// A round measures the closed loops (notifications/s answered 200, serve's and PostgreSQL's
/// CPU-ms per notification), p50/p99 at a fixed rate, and then a flood from a fresh serve:
/// `floodRequests` POSTs of 10 KB garbage from `floodClients` clients that give up after
/// `floodPatience`, while the ledger's tables are locked for `lockSeconds` (serve's peak resident
/// memory and what its clients were answered).
struct ServeBeforeAfter {
    struct Build {
        var name: String
        var binary: String
    }

    struct Round {
        var build: String
        var loops: [ServeComparison.Throughput]
        var fixed: ServeComparison.Latency
        var peakResidentBytes: Int
        var flood: Flood
        /// What the loops added to the ledger per notification recorded: table bytes and WAL.
        var ledger = LedgerFootprint.PerNotification()
    }

    struct Flood {
        var peakResidentBytes: Int
        var answered400 = 0
        var answered503 = 0
        var unanswered = 0
        var other = 0
        var seconds = 0.0
    }

    let builds: [Build]
    let root: String
    let seconds: Double
    let connections: [Int]
    let fixedRate: Double
    var rounds = 2
    var floodRequests = 10_000
    var floodClients = 1_000
    var floodPatience = 1.0
    var lockSeconds = 30.0
    let logger: Logger

    func run() async throws -> [Round] {
        let generator = ServeComparison.LoadGenerator.find()
        let loopSeconds = ServeComparison.loopSeconds(seconds)
        // Every round has a database of its own, so every round sends the same notifications.
        let count = Int(loopSeconds * 3_500) * connections.count + Int(seconds * fixedRate) + 300
        say("  signing \(count) distinct notifications, sent again in each round's fresh database…")
        let figures = try VerificationFigures(count: count)
        let bodies = figures.notifications.map { "{\"signedPayload\":\"\($0)\"}" }
        let scratch = NSTemporaryDirectory() + "serve-before-after-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let rootPath = try ServeComparison.writeRoot(of: figures, in: scratch)

        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(256, floodClients)
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        var results: [Round] = []
        do {
            results = try await rounds(client, bodies: bodies, generator: generator, scratch: scratch, rootPath: rootPath)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try? await client.shutdown()
        return results
    }

    func rounds(_ client: HTTPClient, bodies: [String], generator: ServeComparison.LoadGenerator, scratch: String, rootPath: String) async throws -> [Round] {
        let loopSeconds = ServeComparison.loopSeconds(seconds)
        var results: [Round] = []
        for round in 0..<(rounds * builds.count) {
            let build = builds[round % builds.count]
            say("  round \(round + 1) of \(rounds * builds.count): \(build.name) (\(build.binary))")
            let cluster = try ThrowawayPostgres.start()
            defer { cluster.stop() }
            let postmaster = try CPUSample.postmaster(of: cluster.dataDirectory)
            let environment = ServeComparison.serveEnvironment(database: cluster.url(), rootPath: rootPath)
            let migrated = try ChildProcess.run(build.binary, ["migrate"], environment: environment)
            guard migrated.status == 0 else { throw BenchmarkError("\(build.name): migrate exited \(migrated.status): \(migrated.standardError.suffix(500))") }
            let footprintBefore = try await LedgerFootprint.read(cluster.url(), logger: logger)

            // Throughput and latency.
            let log = scratch + "/serve-\(round).log"
            let serve = try ServeComparison.start(build.binary, ["serve", "--listen", "127.0.0.1:0", "--log-format", "text"], environment: environment, log: log)
            let url = try await ServeComparison.port(in: log, pattern: #"listening on 127\.0\.0\.1:([0-9]+)"#).map { "http://127.0.0.1:\($0)/apple/notifications" }!
            var next = 0
            func take(_ count: Int) -> [String] {
                defer { next = min(next + count, bodies.count) }
                return Array(bodies[min(next, bodies.count)..<min(next + count, bodies.count)])
            }
            let warmUp = take(300)
            next -= warmUp.count - (try await ServeComparison.closedLoop(client, url, warmUp, concurrency: 16, seconds: 1)).sent
            var loops: [ServeComparison.Throughput] = []
            // RECONCILE_BENCH_PERF_DIR=DIR: a CPU profile of serve (perf record) during each round's
            // last closed loop, in DIR/<build>-<round>.data, to see where a difference went.
            let profiles = ProcessInfo.processInfo.environment["RECONCILE_BENCH_PERF_DIR"]
            for count in connections {
                let notifications = take(Int(loopSeconds * 3_500))
                let profiler = try profiles.map { directory in
                    try ChildProcess.spawn(
                        "/usr/bin/perf",
                        ["record", "-q", "-g", "-F", "499", "-p", String(serve.process.pid), "-o",
                         "\(directory)/\(build.name.replacingOccurrences(of: " ", with: "-"))-\(round)-\(count).data", "--", "sleep", String(Int(seconds))],
                        standardOutput: 2)
                }
                let loop = try await ServeComparison.closedLoop(
                    generator, client, url, notifications, concurrency: count, seconds: seconds, scratch: scratch, root: root, service: serve.process.pid,
                    database: postmaster)
                next -= notifications.count - loop.sent
                _ = profiler?.wait()
                say("    \(count) connections: \(number(loop.perSecond))/s, serve \(number(loop.cost.receiver, 3)) CPU-ms per notification, PostgreSQL \(number(loop.cost.database, 3)) (\(loop.refused) not 200)")
                loops.append(loop)
                try await ServeComparison.settle(count, loop)
            }
            let fixed = try await ServeComparison.openLoop(client, url, take(Int(seconds * fixedRate)), rate: fixedRate, record: nil)
            say("    at \(fixed)")
            let peak = PeakMemory.read(serve.process.pid)
            serve.process.send(SIGTERM)
            _ = serve.process.wait()
            let ledger = LedgerFootprint.perNotification(from: footprintBefore, to: try await LedgerFootprint.read(cluster.url(), logger: logger))
            say("    the ledger per notification: \(ledger.text)")

            // The flood, from a serve of its own: its peak is the flood's.
            let floodLog = scratch + "/serve-flood-\(round).log"
            let flooded = try ServeComparison.start(build.binary, ["serve", "--listen", "127.0.0.1:0", "--log-format", "text"], environment: environment, log: floodLog)
            let floodURL = try await ServeComparison.port(in: floodLog, pattern: #"listening on 127\.0\.0\.1:([0-9]+)"#).map { "http://127.0.0.1:\($0)/apple/notifications" }!
            var flood = try await self.flood(client, floodURL, cluster: cluster)
            flood.peakResidentBytes = PeakMemory.read(flooded.process.pid)
            say("    flood: peak RSS \(number(Double(flood.peakResidentBytes) / 1_048_576, 1)) MiB; \(flood.answered400) answered 400, \(flood.answered503) 503, \(flood.unanswered) given up, \(flood.other) other, in \(number(flood.seconds, 1)) s")
            // Killed: a build without limits may take long to work through what it queued.
            flooded.process.send(SIGKILL)
            _ = flooded.process.wait()
            results.append(Round(build: build.name, loops: loops, fixed: fixed, peakResidentBytes: peak, flood: flood, ledger: ledger))
        }
        return results
    }

    /// `floodRequests` distinct garbage POSTs of about 10 KB, `floodClients` at a time, each
    /// client giving up after `floodPatience`, while another session holds the ledger's tables.
    func flood(_ client: HTTPClient, _ url: String, cluster: ThrowawayPostgres) async throws -> Flood {
        let database = try DatabaseURL(cluster.url())
        let held = AsyncStream.makeStream(of: Void.self)
        let lockSeconds = self.lockSeconds
        let logger = self.logger
        let lock = Task {
            try await LedgerDatabase.withClient(database, logger: logger) { client in
                try await client.withTransaction(logger: logger) { connection in
                    try await connection.query("LOCK TABLE app_store.notifications, app_store.rejected_payloads IN ACCESS EXCLUSIVE MODE", logger: logger)
                    held.continuation.yield()
                    try await Task.sleep(for: .milliseconds(Int(lockSeconds * 1000)))
                }
            }
        }
        for await _ in held.stream { break }
        let started = ContinuousClock.now
        let perClient = max(1, floodRequests / floodClients)
        let patience = TimeAmount.milliseconds(Int64(floodPatience * 1000))
        let statuses = await withTaskGroup(of: [Int].self) { group in
            for sender in 0..<floodClients {
                group.addTask {
                    var mine: [Int] = []
                    var random = SystemRandomNumberGenerator()
                    for request in 0..<perClient {
                        let filler = (0..<640).map { _ in String(random.next() as UInt64, radix: 16) }.joined()
                        var post = HTTPClientRequest(url: url)
                        post.method = .POST
                        post.body = .bytes(ByteBuffer(string: "{\"signedPayload\":\"flood\(sender)x\(request).\(filler).sig\"}"))
                        if let response = try? await client.execute(post, timeout: patience) {
                            _ = try? await response.body.collect(upTo: 4096)
                            mine.append(Int(response.status.code))
                        } else {
                            mine.append(0)
                        }
                    }
                    return mine
                }
            }
            return await group.reduce(into: [Int]()) { $0 += $1 }
        }
        let took = ServeComparison.seconds(ContinuousClock.now - started)
        try await lock.value
        var flood = Flood(peakResidentBytes: 0, seconds: took)
        for status in statuses {
            switch status {
            case 400: flood.answered400 += 1
            case 503: flood.answered503 += 1
            case 0: flood.unanswered += 1
            default: flood.other += 1
            }
        }
        return flood
    }
}

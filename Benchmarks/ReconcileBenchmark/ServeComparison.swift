import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import Ledger
import NIOCore
import NIOHTTP1
import PostgresNIO
import SwiftASN1
import Synchronization
import ThrowawayPostgres
import X509

/// `serve` against a minimal receiver built on Apple's Python library (gunicorn, one sync worker
/// per core, psycopg), on the same machine, the same PostgreSQL, the same kind of notifications
/// (each with a nested signed transaction and renewal info, each distinct): the highest rate each
/// sustains with every answer 200, and the latency at half that rate and at a fixed rate.
struct ServeComparison {
    static let gunicornVersion = "27.0.1"
    static let psycopgVersion = "3.3.9"

    let binary: String
    let root: String
    let seconds: Double
    /// The closed loops' connections, each sending its next notification when the last is
    /// answered: one closed loop per count, for each receiver. More connections make `serve`'s
    /// batches larger (its CPU per notification falls); a receiver with one sync worker per
    /// core is saturated at any count.
    var connections = [32, 256]
    /// A directory for each open-loop phase's latencies, request by request (`--serve-latencies`).
    var latencies: String?
    let logger: Logger

    /// What sends the closed loop's requests: wrk (Debian's package; C, one thread, so that the
    /// load generator takes as little of the 2 cores as it can), or, without it, async-http-client
    /// in the benchmark's own process (about a tenth of the machine's CPU at serve's rate).
    enum LoadGenerator: CustomStringConvertible {
        case wrk(String)
        case inProcess

        static func find() -> LoadGenerator {
            let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
            for directory in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(directory)/wrk") {
                return .wrk("\(directory)/wrk")
            }
            return .inProcess
        }

        var description: String {
            switch self {
            case .wrk: "wrk, 1 thread"
            case .inProcess: "async-http-client in the benchmark's process"
            }
        }
    }

    struct Throughput {
        var sent: Int
        var answered: Int
        var refused: Int
        var perSecond: Double
        /// Where the machine's CPU went during the closed loop, per notification answered 200.
        var cost = CPUCost()
    }

    struct Latency {
        var rate: Double
        var sent: Int
        var refused: Int
        var p50: Double
        var p99: Double
        /// The slowest answer, and how far into the phase its request was due (seconds).
        var worst: Double
        var worstDue: Double
    }

    struct Figures {
        /// One closed loop per count of connections, in `connections`' order.
        var serve: [Throughput]
        var serveAtHalf: Latency
        var serveAtFixed: Latency?
        var receiver: [Throughput]
        var receiverAtHalf: Latency
        var committed: (serve: Int, receiver: Int)
        var generator: LoadGenerator
    }

    func run(fixedRate: Double) async throws -> Figures {
        let workers = ProcessInfo.processInfo.activeProcessorCount
        let python = try AppleLibrary.prepare(root: root)
        let installed = try ChildProcess.run(python, ["-m", "pip", "install", "-q", "gunicorn==\(Self.gunicornVersion)", "psycopg[binary]==\(Self.psycopgVersion)"])
        guard installed.status == 0 else { throw BenchmarkError("pip install gunicorn psycopg failed: \(installed.standardError.suffix(500))") }

        // Enough distinct notifications for every phase: each is sent once.
        let generator = LoadGenerator.find()
        say("  closed loop sent by \(generator)\(generator.isInProcess ? " (install Debian's wrk for a lighter one)" : "")")
        // serve's closed loops, its half rate (at most half of 3,500/s) and fixed rate; the
        // receiver's closed loops and half rate; the warm-ups.
        let loopSeconds = Self.loopSeconds(seconds)
        let serveCount = (Int(loopSeconds * 3_500) + Int(loopSeconds * 1_000)) * connections.count + Int(seconds * (1_750 + fixedRate + 500)) + 2_000
        say("  signing \(serveCount) distinct notifications (each with a signed transaction and renewal info)…")
        let figures = try VerificationFigures(count: serveCount)
        let bodies = figures.notifications.map { "{\"signedPayload\":\"\($0)\"}" }
        let scratch = NSTemporaryDirectory() + "serve-benchmark-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let rootPath = try Self.writeRoot(of: figures, in: scratch)

        let cluster = try ThrowawayPostgres.start()
        defer { cluster.stop() }
        let url = try DatabaseURL(cluster.url())
        let postmaster = try CPUSample.postmaster(of: cluster.dataDirectory)
        try await LedgerDatabase.withClient(url, logger: logger) { client in
            _ = try await Migrator().migrate(client, logger: logger)
            try await client.query(
                """
                CREATE SCHEMA apple_library_receiver;
                """, logger: logger)
            try await client.query(
                """
                CREATE TABLE apple_library_receiver.notifications (
                    notification_uuid text PRIMARY KEY, notification_type text NOT NULL, signed_date bigint NOT NULL,
                    original_transaction_id text, expires_date bigint, auto_renew_status int,
                    received_at timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
        }
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 256
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        // Each phase gets notifications never sent before; a closed loop hands back what it left.
        var next = 0
        func take(_ count: Int) -> ArraySlice<String> {
            let lower = min(next, bodies.count)
            defer { next = min(next + count, bodies.count) }
            return bodies[lower..<min(lower + count, bodies.count)]
        }
        func giveBack(_ unused: Int) { next -= unused }

        func record(_ phase: String) -> String? { latencies.map { "\($0)/\(phase).txt" } }

        // serve.
        say("  serve (release build, \(binary))…")
        let environment = Self.serveEnvironment(database: cluster.url(), rootPath: rootPath)
        let serveLog = scratch + "/serve.log"
        let serve = try Self.start(binary, ["serve", "--listen", "127.0.0.1:0", "--log-format", "text"], environment: environment, log: serveLog)
        defer { serve.process.send(SIGKILL) }
        let serveURL = try await Self.port(in: serveLog, pattern: #"listening on 127\.0\.0\.1:([0-9]+)"#).map { "http://127.0.0.1:\($0)/apple/notifications" }!
        let warmUp = Array(take(300))
        giveBack(warmUp.count - (try await Self.closedLoop(client, serveURL, warmUp, concurrency: 16, seconds: 1)).sent)
        // One closed loop per count of connections, each with notifications never sent before.
        func closedLoops(_ url: String, service: pid_t, perSecond budget: Double) async throws -> [Throughput] {
            var loops: [Throughput] = []
            for count in connections {
                let notifications = Array(take(Int(loopSeconds * budget)))
                let loop = try await Self.closedLoop(
                    generator, client, url, notifications, concurrency: count, seconds: seconds, scratch: scratch, root: root, service: service,
                    database: postmaster)
                giveBack(notifications.count - loop.sent)
                say("    \(count) connections: \(number(loop.perSecond)) notifications/s sustained (\(loop.refused) not answered 200)")
                loops.append(loop)
                try await Self.settle(count, loop)
            }
            return loops
        }
        let serveLoops = try await closedLoops(serveURL, service: serve.process.pid, perSecond: 3_500)
        let serveBest = serveLoops.map(\.perSecond).max() ?? 0
        let serveHalf = try await Self.openLoop(
            client, serveURL, Array(take(Int(seconds * serveBest / 2) + 1)), rate: serveBest / 2, record: record("serve-half-rate"))
        say("    at \(serveHalf)")
        var serveFixed: Latency?
        if next + Int(seconds * fixedRate) <= bodies.count {
            serveFixed = try await Self.openLoop(
                client, serveURL, Array(take(Int(seconds * fixedRate))), rate: fixedRate, record: record("serve-\(Int(fixedRate))-per-second"))
            say("    at \(serveFixed!)")
        }
        serve.process.send(SIGTERM)
        _ = serve.process.wait()

        // The receiver on Apple's library.
        say("  Apple's library under gunicorn, \(workers) sync workers…")
        let gunicorn = URL(fileURLWithPath: python).deletingLastPathComponent().appendingPathComponent("gunicorn").path
        var receiverEnvironment = ProcessInfo.processInfo.environment
        receiverEnvironment["RECEIVER_ROOT"] = rootPath
        receiverEnvironment["RECEIVER_BUNDLE_ID"] = VerificationFigures.bundleId
        receiverEnvironment["RECEIVER_APP_APPLE_ID"] = String(VerificationFigures.appAppleId)
        receiverEnvironment["RECEIVER_DSN"] = "host=\(cluster.directory) port=\(cluster.port) user=\(cluster.user) dbname=postgres"
        let receiverPort = Int.random(in: 20_000..<40_000)
        let receiverLog = scratch + "/receiver.log"
        let receiver = try Self.start(
            gunicorn, ["-w", String(workers), "-b", "127.0.0.1:\(receiverPort)", "--chdir", root + "/Benchmarks", "--log-level", "warning", "apple_library_receiver:application"],
            environment: receiverEnvironment, log: receiverLog
        )
        defer { receiver.process.send(SIGKILL) }
        let receiverURL = "http://127.0.0.1:\(receiverPort)/apple/notifications"
        try await Self.waitUntilAnswering(client, receiverURL, log: receiverLog)
        let receiverWarmUp = Array(take(50))
        giveBack(receiverWarmUp.count - (try await Self.closedLoop(client, receiverURL, receiverWarmUp, concurrency: 4, seconds: 1)).sent)
        let receiverLoops = try await closedLoops(receiverURL, service: receiver.process.pid, perSecond: 1_000)
        let receiverBest = receiverLoops.map(\.perSecond).max() ?? 0
        let receiverHalf = try await Self.openLoop(
            client, receiverURL, Array(take(max(1, Int(seconds * receiverBest / 2)))), rate: max(1, receiverBest / 2),
            record: record("receiver-half-rate")
        )
        say("    at \(receiverHalf)")
        receiver.process.send(SIGQUIT)  // gunicorn's quick shutdown (SIGTERM waits for idle keep-alive clients)
        _ = receiver.process.wait()
        try await client.shutdown()

        // What each committed: every 200 must be a row.
        let committed = try await LedgerDatabase.withClient(url, logger: logger) { client in
            var serveRows = 0
            var receiverRows = 0
            for try await count in try await client.query("SELECT count(*)::int FROM app_store.notifications", logger: logger).decode(Int.self) { serveRows = count }
            for try await count in try await client.query("SELECT count(*)::int FROM apple_library_receiver.notifications", logger: logger).decode(Int.self) { receiverRows = count }
            return (serveRows, receiverRows)
        }
        return Figures(
            serve: serveLoops, serveAtHalf: serveHalf, serveAtFixed: serveFixed, receiver: receiverLoops, receiverAtHalf: receiverHalf,
            committed: committed, generator: generator
        )
    }

    /// The signed notifications' root certificate, as DER in `scratch`: its path.
    static func writeRoot(of figures: VerificationFigures, in scratch: String) throws -> String {
        var serializer = DER.Serializer()
        try serializer.serialize(figures.pki.root)
        let path = scratch + "/root.der"
        try Data(serializer.serializedBytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// `serve`'s environment: this process's without any APPSTORE_ setting, then the
    /// benchmark's app, Production, the test root and `database`.
    static func serveEnvironment(database: String, rootPath: String) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APPSTORE_") }
        environment["DATABASE_URL"] = database
        environment["APPSTORE_BUNDLE_ID"] = VerificationFigures.bundleId
        environment["APPSTORE_APP_APPLE_ID"] = String(VerificationFigures.appAppleId)
        environment["APPSTORE_ENVIRONMENT"] = "Production"
        environment["APPSTORE_ROOT_CERTIFICATES"] = rootPath
        environment["APPSTORE_LOG_LEVEL"] = "warning"
        return environment
    }

    /// How long a closed loop may run, for its count of notifications: wrk runs whole seconds,
    /// and starting takes a little more.
    static func loopSeconds(_ seconds: Double) -> Double { seconds.rounded(.up) + 1 }

    /// Waits until what a closed loop left in flight has been answered: the requests its
    /// connections had sent when it stopped are still worked through (gunicorn's queue), and the
    /// next phase must not wait behind them.
    static func settle(_ connections: Int, _ loop: Throughput) async throws {
        try await Task.sleep(for: .milliseconds(Int(1000 * (1 + Double(connections) / max(1, loop.perSecond)))))
    }

    /// The closed loop through `generator`, with the CPU it cost per notification (`service`: the
    /// receiver's process). `sent` is how many of `bodies` may have been used (with wrk: those
    /// answered plus those still in flight when it stopped), so that what follows sends only
    /// notifications never sent before.
    static func closedLoop(
        _ generator: LoadGenerator, _ client: HTTPClient, _ url: String, _ bodies: [String], concurrency: Int, seconds: Double, scratch: String,
        root: String, service: pid_t, database: pid_t
    ) async throws -> Throughput {
        guard case .wrk(let wrk) = generator else {
            let start = CPUSample.take(service: service, database: database)
            var throughput = try await closedLoop(client, url, bodies, concurrency: concurrency, seconds: seconds)
            throughput.cost = CPUSample.cost(from: start, to: CPUSample.take(service: service, database: database), answered: throughput.answered)
            return throughput
        }
        // In memory where there is a tmpfs with room for it (a container's is often 64 MB): half a
        // gigabyte written to the disk just before a phase is flushed by the kernel during the
        // next ones, and stalls the database's writes.
        let listed = Data(bodies.joined(separator: "\n").utf8)
        let free = (try? FileManager.default.attributesOfFileSystem(forPath: "/dev/shm"))?[.systemFreeSize]
        let room = (free as? NSNumber)?.int64Value ?? (free as? UInt64).map { Int64(clamping: $0) } ?? (free as? Int).map(Int64.init) ?? 0
        let memory = FileManager.default.isWritableFile(atPath: "/dev/shm") && room > 2 * Int64(listed.count) ? "/dev/shm" : scratch
        let list = memory + "/appstore-reconcile-bodies-\(UUID().uuidString).txt"
        try listed.write(to: URL(fileURLWithPath: list))
        defer { try? FileManager.default.removeItem(atPath: list) }
        // From here: wrk starts (in "the rest"), then sends for `seconds`, reading the list as it goes.
        let start = CPUSample.take(service: service, database: database)
        var environment = ProcessInfo.processInfo.environment
        environment["WRK_BODIES"] = list
        let arguments = [
            "-t", "1", "-c", String(concurrency), "-d", "\(Int(seconds.rounded(.up)))s", "--timeout", "30s",
            "-s", root + "/Benchmarks/closed_loop.lua", url,
        ]
        let completion = try ChildProcess.run(wrk, arguments, environment: environment)
        let end = CPUSample.take(service: service, database: database)
        guard completion.status == 0, let line = completion.standardOutput.split(separator: "\n").first(where: { $0.hasPrefix("closed-loop ") }) else {
            throw BenchmarkError("wrk failed (\(completion.status)): \(completion.standardError.suffix(500))\(completion.standardOutput.suffix(500))")
        }
        var figures: [String: Int] = [:]
        for field in line.split(separator: " ").dropFirst() {
            let parts = field.split(separator: "=")
            if parts.count == 2, let value = Int(parts[1]) { figures[String(parts[0])] = value }
        }
        guard let completed = figures["answered"], let micros = figures["duration_us"], micros > 0, let statusErrors = figures["status_errors"] else {
            throw BenchmarkError("wrk's summary could not be read: \(line)")
        }
        let otherErrors = ["connect", "read", "write", "timeout"].compactMap { figures[$0] }.reduce(0, +)
        let answered = completed - statusErrors
        // Used: those answered or failed, one per connection still in flight when wrk stopped,
        // and the one wrk's check of the script read.
        let used = completed + otherErrors + concurrency + 1
        if used >= bodies.count { say("    warning: the closed loop ran out of distinct notifications; its rate is capped at what they allowed") }
        return Throughput(
            sent: min(bodies.count, used), answered: answered, refused: statusErrors + otherErrors,
            perSecond: Double(answered) / (Double(micros) / 1e6), cost: CPUSample.cost(from: start, to: end, answered: answered)
        )
    }

    /// `concurrency` clients, each sending its next notification when the last is answered, for
    /// `seconds` (or until the notifications run out): answers 200 per second.
    static func closedLoop(_ client: HTTPClient, _ url: String, _ bodies: [String], concurrency: Int, seconds: Double) async throws -> Throughput {
        final class Cursor: Sendable { let next = Atomic<Int>(0) }
        let cursor = Cursor()
        let start = ContinuousClock.now
        let end = start + .milliseconds(Int(seconds * 1000))
        let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var answered = 0
                    var refused = 0
                    while ContinuousClock.now < end {
                        let index = cursor.next.wrappingAdd(1, ordering: .relaxed).oldValue
                        guard index < bodies.count else { break }
                        if try await post(client, url, bodies[index]) == 200 { answered += 1 } else { refused += 1 }
                    }
                    return (answered, refused)
                }
            }
            return try await group.reduce(into: (0, 0)) { $0.0 += $1.0; $0.1 += $1.1 }
        }
        let elapsed = ContinuousClock.now - start
        return Throughput(sent: min(cursor.next.load(ordering: .relaxed), bodies.count), answered: results.0, refused: results.1, perSecond: Double(results.0) / ServeComparison.seconds(elapsed))
    }

    /// One notification every 1/`rate` s whatever the answers (no coordinated omission): each
    /// latency runs from when the request was due to when its answer arrived. With `record`, every
    /// request's (seconds into the phase it was due, latency in ms) goes to that file, in order.
    static func openLoop(_ client: HTTPClient, _ url: String, _ bodies: [String], rate: Double, record: String?) async throws -> Latency {
        let start = ContinuousClock.now
        let interval = 1 / rate
        let results = try await withThrowingTaskGroup(of: (due: Double, latency: Double, answered: Bool).self) { group in
            for (index, body) in bodies.enumerated() {
                let offset = Double(index) * interval
                let due = start + .microseconds(Int(offset * 1_000_000))
                try await Task.sleep(until: due, clock: .continuous)
                group.addTask {
                    let status = try await post(client, url, body)
                    return (offset, ServeComparison.seconds(ContinuousClock.now - due), status == 200)
                }
            }
            return try await group.reduce(into: [(due: Double, latency: Double, answered: Bool)]()) { $0.append($1) }
        }
        if let record {
            let lines = results.sorted { $0.due < $1.due }.map { "\(number($0.due, 4)) \(number($0.latency * 1000, 2))" }
            try (["# seconds into the phase the request was due, latency ms"] + lines).joined(separator: "\n").write(toFile: record, atomically: true, encoding: .utf8)
        }
        let latencies = results.map(\.latency).sorted()
        func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int((Double(latencies.count) * p).rounded(.up)) - 1)] }
        let worst = results.max { $0.latency < $1.latency }
        return Latency(
            rate: rate, sent: bodies.count, refused: results.filter { !$0.answered }.count, p50: percentile(0.5), p99: percentile(0.99),
            worst: worst?.latency ?? 0, worstDue: worst?.due ?? 0
        )
    }

    static func post(_ client: HTTPClient, _ url: String, _ body: String) async throws -> Int {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: body))
        do {
            let response = try await client.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 16)
            return Int(response.status.code)
        } catch {
            return 0
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func start(_ executable: String, _ arguments: [String], environment: [String: String], log: String) throws -> (process: ChildProcess, log: String) {
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let descriptor = open(log, O_WRONLY)
        defer { close(descriptor) }
        return (try ChildProcess.spawn(executable, arguments, environment: environment, standardOutput: descriptor, standardError: descriptor), log)
    }

    static func port(in log: String, pattern: String) async throws -> Int? {
        for _ in 0..<600 {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let range = text.range(of: pattern, options: .regularExpression),
                let port = text[range].split(separator: ":").last.flatMap({ Int($0) })
            {
                return port
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw BenchmarkError("serve did not start: \(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(1000))")
    }

    static func waitUntilAnswering(_ client: HTTPClient, _ url: String, log: String) async throws {
        for _ in 0..<300 {
            var request = HTTPClientRequest(url: url)
            request.method = .GET
            if let response = try? await client.execute(request, timeout: .seconds(2)), response.status.code == 405 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchmarkError("the receiver did not start: \(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(1000))")
    }
}

extension ServeComparison.LoadGenerator {
    var isInProcess: Bool {
        if case .inProcess = self { true } else { false }
    }
}

extension ServeComparison.Latency: CustomStringConvertible {
    /// One line of progress: the rate, p50 and p99, and the slowest answer with when it was due.
    var description: String {
        "\(number(rate)) /s: p50 \(number(p50 * 1000, 1)) ms, p99 \(number(p99 * 1000, 1)) ms, slowest \(number(worst * 1000, 1)) ms (due \(number(worstDue, 1)) s in)"
    }
}

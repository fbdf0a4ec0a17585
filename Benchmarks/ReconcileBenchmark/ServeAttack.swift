import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import Ledger
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import RawConnection
import ThrowawayPostgres

/// Issue 53's attacks on `serve`, with more load than a test may put on a shared machine: each
/// against a fresh serve of the release build, with its defaults and with its connection and
/// rejection bounds moved out of the way (the flags set past any attack), alternately, each
/// round in a fresh database.
///
/// 1. Pipelining slow readers: `readers` connections each sending 3,000 pipelined `GET /metrics`
///    and never reading; a genuine notification posted meanwhile; how many are still open after
///    `closeWait`, serve's peak memory, and its memory 10 s after the clients let go.
/// 2. Body drips: `readers` connections sending `GET /livez` with a declared body of 1 GB, a
///    byte every 2 s; a genuine notification posted meanwhile; how many are open after serve's
///    body timeout (10 s) and a margin.
/// 3. Garbage: `floodSeconds` of distinct `{"signedPayload":"<330 random characters>"}` POSTs
///    from `floodConnections` keep-alive connections: what the ledger (tables, WAL) and serve's
///    log (at info, a level above its default) grew by.
/// 4. Tampered copies: the same with distinct copies of a genuine notification of this app,
///    four characters of its signature set from the request's index.
/// 5. Malleated copies: `malleatedCopies` POSTs of another app's genuine notification, half of
///    them re-signed as (r, n − s): rows added.
struct ServeAttack {
    struct Variant {
        var name: String
        var arguments: [String]
    }

    /// What one round measured.
    struct Round {
        var variant: String
        var pipelining = Held()
        var drips = Held()
        var garbage = Flood()
        var tampered = Flood()
        var malleated = Flood()
    }

    /// Connections that hold serve: how many were still open when looked at, memory, and how a
    /// genuine notification posted meanwhile was answered.
    struct Held {
        var connections = 0
        var openAfter = 0
        var lookedAfter = 0.0
        var peakResidentBytes = 0
        var residentAfterClose = 0
        var genuineStatus = 0
        var genuineSeconds = 0.0
    }

    /// Requests posted, and what they left: ledger bytes, WAL bytes, log bytes, rows.
    struct Flood {
        var sent = 0
        var answered400 = 0
        var other = 0
        var ledgerBytes = 0
        var walBytes = 0
        var logBytes = 0
        var rows = 0
    }

    static let variants = [
        Variant(name: "defaults", arguments: []),
        Variant(
            name: "bounds out of the way",
            arguments: ["--max-pipelined-requests", "100000000", "--write-timeout", "100000", "--request-timeout", "100000", "--rejections-kept-per-hour", "1000000000"]),
    ]

    let root: String
    let binary: String
    var rounds = 1
    var readers = 1_000
    var closeWait = 30.0
    var floodSeconds = 20.0
    var floodConnections = 64
    var malleatedCopies = 1_000
    let logger: Logger

    func run() async throws -> [Round] {
        let figures = try VerificationFigures(count: 2 * rounds * Self.variants.count + 2)
        let otherApp = try figures.notification(of: "com.example.someone-else")
        guard let malleated = SignatureMalleation.malleated(otherApp) else { throw BenchmarkError("could not malleate the other app's notification") }
        let scratch = NSTemporaryDirectory() + "serve-attack-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let rootPath = try ServeComparison.writeRoot(of: figures, in: scratch)
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(floodConnections, 16)
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        var genuine = figures.notifications.makeIterator()
        var results: [Round] = []
        do {
            for index in 0..<(rounds * Self.variants.count) {
                let variant = Self.variants[index % Self.variants.count]
                say("  round \(index + 1) of \(rounds * Self.variants.count): \(variant.name)")
                let cluster = try ThrowawayPostgres.start()
                defer { cluster.stop() }
                var environment = ServeComparison.serveEnvironment(database: cluster.url(), rootPath: rootPath)
                // Info, one level more than serve's default (notice): the log's bound must hold for a
                // team that turned it up.
                environment["APPSTORE_LOG_LEVEL"] = "info"
                let migrated = try ChildProcess.run(binary, ["migrate"], environment: environment)
                guard migrated.status == 0 else { throw BenchmarkError("migrate exited \(migrated.status): \(migrated.standardError.suffix(500))") }
                var round = Round(variant: variant.name)
                func serve(_ name: String) async throws -> (process: ChildProcess, log: String, port: Int) {
                    let log = scratch + "/serve-\(index)-\(name).log"
                    let started = try ServeComparison.start(
                        binary, ["serve", "--listen", "127.0.0.1:0", "--log-format", "text"] + variant.arguments, environment: environment, log: log)
                    guard let port = try await ServeComparison.port(in: log, pattern: #"listening on 127\.0\.0\.1:([0-9]+)"#) else { throw BenchmarkError("no port") }
                    return (started.process, log, port)
                }
                func stop(_ process: ChildProcess) {
                    process.send(SIGKILL)  // a serve without bounds may take long to drain what it holds
                    _ = process.wait()
                }
                let pipelining = try await serve("pipelining")
                round.pipelining = try await held(
                    pipelining, request: Array(String(repeating: "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", count: 3_000).utf8), drip: false,
                    genuine: genuine.next()!, client)
                stop(pipelining.process)
                say("    pipelining readers: \(round.pipelining)")
                let drips = try await serve("drips")
                round.drips = try await held(
                    drips, request: Array("GET /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n".utf8), drip: true, genuine: genuine.next()!, client)
                stop(drips.process)
                say("    body drips: \(round.drips)")
                let flooded = try await serve("flood")
                let url = "http://127.0.0.1:\(flooded.port)/apple/notifications"
                round.garbage = try await flood(client, url, log: flooded.log, database: cluster.url()) { _ in
                    var random = SystemRandomNumberGenerator()
                    let characters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
                    return String((0..<330).map { _ in characters[Int(random.next() as UInt64 % 64)] })
                }
                say("    garbage: \(round.garbage)")
                // A notification never posted (the genuine ones come from the start of the list),
                // four characters of its signature set from the request's index: distinct copies.
                let original = Array(figures.notifications[figures.notifications.count - 1])
                let signatureStart = original.lastIndex(of: ".")! + 1
                round.tampered = try await flood(client, url, log: flooded.log, database: cluster.url()) { index in
                    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
                    var characters = original
                    for place in 0..<4 { characters[signatureStart + 2 + place] = alphabet[(index >> (6 * place)) & 63] }
                    return String(characters)
                }
                say("    tampered copies: \(round.tampered)")
                round.malleated = try await flood(client, url, log: flooded.log, database: cluster.url(), count: malleatedCopies) { index in
                    index % 2 == 0 ? otherApp : malleated
                }
                say("    another app's notification, malleated: \(round.malleated)")
                stop(flooded.process)
                results.append(round)
            }
        } catch {
            try? await client.shutdown()
            throw error
        }
        try? await client.shutdown()
        return results
    }

    /// `readers` connections each sending `request` (then a byte every 2 s when `drip`), never
    /// reading; a genuine notification posted after they are open.
    func held(_ serve: (process: ChildProcess, log: String, port: Int), request: [UInt8], drip: Bool, genuine: String, _ client: HTTPClient) async throws -> Held {
        var result = Held(connections: readers)
        var descriptors: [Int32] = []
        defer { for descriptor in descriptors { close(descriptor) } }
        for _ in 0..<readers {
            let descriptor = try RawConnection.connect(port: serve.port)
            descriptors.append(descriptor)
            RawConnection.sendWithoutWaiting(descriptor, request)
        }
        let opened = ContinuousClock.now
        let dripping = Task { [descriptors] in
            while drip && !Task.isCancelled {
                try? await Task.sleep(for: .seconds(2))
                for descriptor in descriptors { RawConnection.sendWithoutWaiting(descriptor, [UInt8(ascii: "A")]) }
            }
        }
        defer { dripping.cancel() }
        var post = HTTPClientRequest(url: "http://127.0.0.1:\(serve.port)/apple/notifications")
        post.method = .POST
        post.body = .bytes(ByteBuffer(string: "{\"signedPayload\":\"\(genuine)\"}"))
        let posted = ContinuousClock.now
        if let response = try? await client.execute(post, timeout: .seconds(30)) {
            _ = try? await response.body.collect(upTo: 65_536)
            result.genuineStatus = Int(response.status.code)
        }
        result.genuineSeconds = seconds(ContinuousClock.now - posted)
        var open = descriptors.count
        while ContinuousClock.now < opened + .milliseconds(Int(closeWait * 1000)) {
            open = descriptors.filter { !RawConnection.peerClosed($0) }.count
            if open == 0 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        result.openAfter = open
        result.lookedAfter = seconds(ContinuousClock.now - opened)
        result.peakResidentBytes = RawConnection.peakResidentBytes(serve.process.pid)
        dripping.cancel()
        for descriptor in descriptors { close(descriptor) }
        descriptors = []
        try await Task.sleep(for: .seconds(10))
        result.residentAfterClose = RawConnection.residentBytes(serve.process.pid)
        return result
    }

    /// Distinct payloads from `floodConnections` connections for `floodSeconds` (or `count` in
    /// all), and what they left in the ledger and the log.
    func flood(_ client: HTTPClient, _ url: String, log: String, database: String, count: Int? = nil, payload: @escaping @Sendable (Int) -> String) async throws -> Flood {
        let before = try await footprint(database)
        let logBefore = (try? FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0
        let end = ContinuousClock.now + .milliseconds(Int(floodSeconds * 1000))
        let connections = floodConnections
        let statuses = await withTaskGroup(of: [Int].self) { group in
            for sender in 0..<connections {
                group.addTask {
                    var mine: [Int] = []
                    var index = sender
                    while count.map({ index < $0 }) ?? (ContinuousClock.now < end) {
                        var post = HTTPClientRequest(url: url)
                        post.method = .POST
                        post.body = .bytes(ByteBuffer(string: "{\"signedPayload\":\"\(payload(index))\"}"))
                        if let response = try? await client.execute(post, timeout: .seconds(30)) {
                            _ = try? await response.body.collect(upTo: 4096)
                            mine.append(Int(response.status.code))
                        } else {
                            mine.append(0)
                        }
                        index += connections
                    }
                    return mine
                }
            }
            return await group.reduce(into: [Int]()) { $0 += $1 }
        }
        // What serve queued is written before the footprint is read.
        try await Task.sleep(for: .seconds(2))
        let after = try await footprint(database)
        let logAfter = (try? FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0
        return Flood(
            sent: statuses.count, answered400: statuses.filter { $0 == 400 }.count, other: statuses.filter { $0 != 400 }.count,
            ledgerBytes: after.bytes - before.bytes, walBytes: after.wal - before.wal, logBytes: logAfter - logBefore, rows: after.rows - before.rows)
    }

    /// The app_store schema's bytes (tables, TOAST, indexes), the WAL position, and the rows of
    /// the tables an unproven request can reach.
    func footprint(_ url: String) async throws -> (bytes: Int, wal: Int, rows: Int) {
        try await LedgerDatabase.withClient(try DatabaseURL(url), logger: logger) { client in
            let rows = try await client.query(
                """
                SELECT (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = 'app_store' AND c.relkind = 'r')::bigint,
                    (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint,
                    ((SELECT count(*) FROM app_store.rejected_payloads) + (SELECT count(*) FROM app_store.notifications))::bigint
                """,
                logger: logger
            )
            for try await (bytes, wal, count) in rows.decode((Int, Int, Int).self) { return (bytes, wal, count) }
            throw BenchmarkError("no footprint")
        }
    }
}

extension ServeAttack.Held: CustomStringConvertible {
    var description: String {
        "\(openAfter) of \(connections) open after \(number(lookedAfter, 1)) s; peak RSS \(number(Double(peakResidentBytes) / 1_048_576, 1)) MiB, "
            + "\(number(Double(residentAfterClose) / 1_048_576, 1)) MiB 10 s after the clients closed; a genuine notification answered \(genuineStatus) in \(number(genuineSeconds, 2)) s"
    }
}

extension ServeAttack.Flood: CustomStringConvertible {
    var description: String {
        "\(sent) sent (\(answered400) answered 400, \(other) other): ledger +\(number(Double(ledgerBytes) / 1_048_576, 2)) MiB, WAL +\(number(Double(walBytes) / 1_048_576, 2)) MiB, "
            + "log +\(number(Double(logBytes) / 1024, 1)) KiB, rows +\(rows)"
    }
}

extension ServeAttack {
    /// The table's rows: each round's figures, the targets judged on the defaults' rounds.
    static func rows(_ rounds: [Round], _ attack: ServeAttack) -> [Row] {
        func mib(_ bytes: Int) -> String { number(Double(bytes) / 1_048_576, 2) }
        var rows: [Row] = []
        for round in rounds {
            let judged = round.variant == "defaults"
            for (name, held, closeTarget) in [
                ("\(attack.readers) pipelining readers", round.pipelining, "all closed"), ("\(attack.readers) body drips on /livez", round.drips, "all closed ≤ 15 s"),
            ] {
                let closed = held.openAfter == 0 && (name.contains("drips") ? held.lookedAfter <= 15 : true)
                rows.append(
                    Row(section: "serve attacked, \(round.variant)", figure: "\(name): open after (s)", value: "\(held.openAfter) after \(number(held.lookedAfter, 1))",
                        target: judged ? closeTarget : "", met: judged ? closed : nil))
                rows.append(
                    Row(section: "serve attacked, \(round.variant)", figure: "\(name): peak RSS; RSS 10 s after the clients closed",
                        value: "\(mib(held.peakResidentBytes)) / \(mib(held.residentAfterClose)) MiB", target: judged ? "< 300 MiB" : "",
                        met: judged ? held.peakResidentBytes < 300 * 1_048_576 : nil))
                rows.append(
                    Row(section: "serve attacked, \(round.variant)", figure: "\(name): a genuine notification meanwhile", value: "\(held.genuineStatus) in \(number(held.genuineSeconds, 2)) s",
                        target: judged ? "200 within 2 s" : "", met: judged ? held.genuineStatus == 200 && held.genuineSeconds <= 2 : nil))
            }
            for (name, flood) in [
                ("\(number(attack.floodSeconds)) s of distinct garbage, \(attack.floodConnections) connections", round.garbage),
                ("\(number(attack.floodSeconds)) s of distinct tampered copies, \(attack.floodConnections) connections", round.tampered),
            ] {
                rows.append(
                    Row(section: "serve attacked, \(round.variant)", figure: "\(name): sent (400); ledger, WAL MiB; log KiB; rows",
                        value: "\(flood.sent) (\(flood.answered400)); \(mib(flood.ledgerBytes)), \(mib(flood.walBytes)); \(number(Double(flood.logBytes) / 1024, 1)); \(flood.rows)",
                        target: judged ? "ledger < 5 MiB, log < 1 MiB" : "", met: judged ? flood.ledgerBytes < 5 * 1_048_576 && flood.logBytes < 1_048_576 : nil))
            }
            rows.append(
                Row(section: "serve attacked, \(round.variant)", figure: "\(attack.malleatedCopies) copies of another app's notification, half malleated: rows",
                    value: "\(round.malleated.rows) (\(round.malleated.answered400) answered 400)", target: judged ? "≤ 1" : "", met: judged ? round.malleated.rows <= 1 : nil))
        }
        return rows
    }
}

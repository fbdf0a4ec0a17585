import Foundation
import HTTPTypes
import Hummingbird
package import Logging
import NIOCore

/// The simulated API served over HTTP on a loopback port, for the client, the reconciler, the
/// demo and the benchmarks to talk to exactly as they talk to Apple.
package enum SimulatorServer {
    /// Serves `api` while `body` runs; `body` gets the base URL (`http://127.0.0.1:PORT`).
    package static func withRunning<Result: Sendable>(
        _ api: SimulatedAPI, port: Int = 0, logger: Logger = Logger(label: "appstore-simulator"),
        _ body: @Sendable (String) async throws -> Result
    ) async throws -> Result {
        try await withRunning(port: port, logger: logger, latency: { _ in api.options.latency }, handle: api.handle, body)
    }

    /// Serves every app of `store` (one environment's host, `bid` picking the app) while `body` runs.
    package static func withRunning<Result: Sendable>(
        _ store: SimulatedAppStore, port: Int = 0, logger: Logger = Logger(label: "appstore-simulator"),
        _ body: @Sendable (String) async throws -> Result
    ) async throws -> Result {
        try await withRunning(
            port: port, logger: logger, latency: { store.app(authorization: $0)?.options.latency ?? .zero }, handle: store.handle, body)
    }

    private static func withRunning<Result: Sendable>(
        port: Int, logger: Logger, latency: @escaping @Sendable (String?) -> Duration,
        handle: @escaping @Sendable (String, String, [(String, String)], String?, [UInt8], Date) -> SimulatedAPI.Answer,
        _ body: @Sendable (String) async throws -> Result
    ) async throws -> Result {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        // Stopping the server by cancellation makes Hummingbird log errors about its channels.
        var quiet = logger
        quiet.logLevel = .critical
        let responder = CallbackResponder<BasicRequestContext> { request, _ in
            var request = request
            let bytes = try await request.collectBody(upTo: 1 << 20)
            let authorization = request.headers[.authorization]
            let delay = latency(authorization)
            if delay > .zero { try await Task.sleep(for: delay) }
            let answer = handle(
                request.method.rawValue, request.uri.path, parseQuery(request.uri.query), authorization, Array(bytes.readableBytesView), Date()
            )
            var headers = HTTPFields()
            for (name, value) in answer.headers {
                if let field = HTTPField.Name(name) { headers[field] = value }
            }
            if answer.dropMidBody {
                // Promise the whole body, send half, then fail the stream: the connection closes.
                let half = ByteBuffer(bytes: answer.body.prefix(answer.body.count / 2))
                return Response(
                    status: HTTPResponse.Status(code: answer.status), headers: headers,
                    body: ResponseBody(contentLength: answer.body.count) { writer in
                        try await writer.write(half)
                        throw DroppedConnection()
                    }
                )
            }
            return Response(
                status: HTTPResponse.Status(code: answer.status), headers: headers,
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body))
            )
        }
        let application = Application(
            responder: responder,
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: port), serverName: "appstore-simulator"),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            logger: quiet
        )
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await application.run() }
            var iterator = ports.makeAsyncIterator()
            guard let boundPort = await iterator.next() else { throw CancellationError() }
            defer { group.cancelAll() }
            return try await body("http://127.0.0.1:\(boundPort)")
        }
    }

    struct DroppedConnection: Error {}

    /// Query items in order, repeated names kept (`productType=A&productType=B`).
    static func parseQuery(_ query: String?) -> [(String, String)] {
        guard let query, !query.isEmpty else { return [] }
        return query.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let value = parts.count > 1 ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(parts[1])) : ""
            return (name, value)
        }
    }
}

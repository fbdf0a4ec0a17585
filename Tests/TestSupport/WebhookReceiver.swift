package import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import SignedData
import Synchronization

/// A team's webhook handler, for the re-delivery tests: an HTTP server on a loopback port that
/// records every request it gets and answers each with the status `answer` gives for its index
/// (0-based, in arrival order), after `latency`. A request is recorded when it arrives, before
/// it is answered.
package final class WebhookReceiver: Sendable {
    package struct Received: Sendable {
        package var index: Int
        package var method: String
        package var path: String
        package var contentType: String?
        package var authorization: String?
        package var body: String
        package var status: Int
        package var at: Date

        /// The body's `signedPayload`, when the body is `{"signedPayload":"…"}`.
        package var signedPayload: String? {
            guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], object.count == 1 else { return nil }
            return object["signedPayload"] as? String
        }

        package var notificationUUID: String? { signedPayload.flatMap(UnverifiedPayload.notificationUUID(of:))?.lowercased() }

        /// The notification's signedDate (UNIX ms), read from the unverified payload.
        package var signedDate: Int64? {
            guard let signedPayload, case .number(let value)? = UnverifiedPayload.fields(of: signedPayload)?["signedDate"] else { return nil }
            return Int64(value)
        }
    }

    private let log = Mutex<[Received]>([])
    let answer: @Sendable (Int) -> Int
    let byAttempt: (@Sendable (_ index: Int, _ earlierOfTheSameNotification: Int) -> Int)?
    let latency: Duration

    package init(latency: Duration = .zero, answer: @escaping @Sendable (Int) -> Int = { _ in 200 }) {
        self.answer = answer
        self.byAttempt = nil
        self.latency = latency
    }

    /// A handler whose answer depends on how often it was sent the same notification before.
    package init(latency: Duration = .zero, byAttempt: @escaping @Sendable (_ index: Int, _ earlierOfTheSameNotification: Int) -> Int) {
        self.answer = { _ in 200 }
        self.byAttempt = byAttempt
        self.latency = latency
    }

    package var received: [Received] { log.withLock { $0 } }

    /// Serves while `body` runs; `body` gets the handler's URL (`http://127.0.0.1:PORT/apple/notifications`).
    package func withRunning<Result: Sendable>(_ body: @Sendable (String) async throws -> Result) async throws -> Result {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        var quiet = Logger(label: "webhook-receiver")
        quiet.logLevel = .critical
        let responder = CallbackResponder<BasicRequestContext> { [self] request, _ in
            var request = request
            let bytes = try await request.collectBody(upTo: 1 << 20)
            // Recorded on arrival, answered after the latency.
            let status = log.withLock { entries in
                let index = entries.count
                var status = answer(index)
                if let byAttempt {
                    let uuid = Received(index: 0, method: "", path: "", body: String(buffer: bytes), status: 0, at: Date()).notificationUUID
                    status = byAttempt(index, uuid.map { uuid in entries.filter { $0.notificationUUID == uuid }.count } ?? 0)
                }
                entries.append(
                    Received(
                        index: index, method: request.method.rawValue, path: request.uri.path, contentType: request.headers[.contentType],
                        authorization: request.headers[.authorization], body: String(buffer: bytes), status: status, at: Date()
                    )
                )
                return status
            }
            if latency > .zero { try await Task.sleep(for: latency) }
            // A redirect points elsewhere on this server: a client that followed it would show up there.
            var headers = HTTPFields()
            if (300..<400).contains(status) { headers[.location] = "/elsewhere" }
            return Response(
                status: HTTPResponse.Status(code: status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: status < 300 ? "ok" : "not now"))
            )
        }
        let application = Application(
            responder: responder,
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0), serverName: "webhook-receiver"),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            logger: quiet
        )
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await application.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            defer { group.cancelAll() }
            return try await body("http://127.0.0.1:\(port)/apple/notifications")
        }
    }
}

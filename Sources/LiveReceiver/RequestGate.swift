import HTTPTypes
import Hummingbird

/// What every request to `serve` passes before its route, and what answers one that has none.
/// A request whose connection is already closed (by its bounds: a client pipelining requests
/// it never reads) is skipped, since nobody can read an answer. Only Apple's POST has a body:
/// any other request that comes with one is answered at once and its connection's input closed
/// unread (issue 53: a GET /livez declaring a gigabyte and dripping a byte now and then held its
/// connection for ever, each part restarting the idle timer, and one streamed at full speed cost
/// a core). Another method at the notification path is 405 (Allow: POST); any other path 404.
struct RequestGate: RouterMiddleware {
    typealias Context = ReceiverRequestContext
    let routes: ReceiverRoutes

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if routes.skipsClosedConnections, !context.channel.isActive {
            return ReceiverRoutes.closing(ReceiverRoutes.text(503, "the connection is closed\n"))
        }
        // As the router matches paths: by their segments (a trailing slash is the same path).
        let atNotificationPath = request.uri.path.split(separator: "/") == routes.path.split(separator: "/")
        if !(atNotificationPath && request.method == .post), ReceiverRoutes.carriesBody(request) {
            context.channel.close(mode: .input, promise: nil)
            routes.metrics.record(other: .bodyRefused)
            return ReceiverRoutes.closing(ReceiverRoutes.text(413, "content too large: no request body is accepted here\n"))
        }
        if atNotificationPath, request.method != .post {
            routes.metrics.record(other: .methodNotAllowed)
            var response = ReceiverRoutes.text(405, "method not allowed: POST only\n")
            response.headers[.allow] = "POST"
            return response
        }
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            routes.metrics.record(other: .notFound)
            return ReceiverRoutes.text(404, "not found\n")
        }
    }
}

import Decisions
import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// The I/O of `ConnectionGuardState` on one connection: after Hummingbird's HTTP/1 decoding, it
/// sees each request part read and each answer part written. `onClose` counts a closure,
/// `onRefuse` a request refused from its head (`ProtocolSwitch`), which the guard answers itself,
/// on the event loop, before anything more is read: the HTTP/1 decoder before it keeps every byte
/// after such a head, so any hop to the router would let a fast client fill it meanwhile.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var state: ConnectionGuardState
    private var requestTimer: Scheduled<Void>?
    private var writeTimer: Scheduled<Void>?
    private let onClose: @Sendable (ConnectionClosure) -> Void
    private let onRefuse: @Sendable (ProtocolSwitch) -> Void

    init(
        bounds: ConnectionBounds, onClose: @escaping @Sendable (ConnectionClosure) -> Void,
        onRefuse: @escaping @Sendable (ProtocolSwitch) -> Void = { _ in }
    ) {
        self.state = ConnectionGuardState(bounds: bounds)
        self.onClose = onClose
        self.onRefuse = onRefuse
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !state.closed else { return }  // closing: nothing more is decoded into memory
        let action: ConnectionGuardState.Action =
            switch unwrapInboundIn(data) {
            case .head(let head):
                state.requestHead(switching: ProtocolSwitch(method: head.method.rawValue, hasUpgradeField: head.headerFields[.upgrade] != nil))
            case .body: .none
            case .end: state.requestEnd()
            }
        perform(action, context: context)
        guard !state.closed else { return }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { perform(state.answerEnd(), context: context) }
        context.write(data, promise: promise)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        perform(state.writabilityChanged(isWritable: context.channel.isWritable), context: context)
        context.fireChannelWritabilityChanged()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        requestTimer?.cancel()
        writeTimer?.cancel()
    }

    private func perform(_ action: ConnectionGuardState.Action, context: ChannelHandlerContext) {
        switch action {
        case .none: break
        case .close(let closure):
            requestTimer?.cancel()
            writeTimer?.cancel()
            onClose(closure)
            context.close(promise: nil)
        case .refuse(let switching):
            requestTimer?.cancel()
            writeTimer?.cancel()
            onRefuse(switching)
            refuse(switching, context: context)
        case .stopReading(let switching):
            // The requests before it are answered; the connection ends after them.
            requestTimer?.cancel()
            onRefuse(switching)
            context.close(mode: .input, promise: nil)
        case .startRequestTimer:
            requestTimer?.cancel()
            requestTimer = schedule(.requestTimeout, after: state.bounds.requestTimeout, context: context)
        case .cancelRequestTimer:
            requestTimer?.cancel()
            requestTimer = nil
        case .startWriteTimer:
            guard writeTimer == nil else { return }
            writeTimer = schedule(.writeTimeout, after: state.bounds.writeTimeout, context: context)
        case .cancelWriteTimer:
            writeTimer?.cancel()
            writeTimer = nil
        }
    }

    /// Closes the input (the socket is read no more: what the client sends next stays in the
    /// kernel's bounded buffer), writes the refusal, and closes the connection once it is written;
    /// the write timer still bounds a client that reads nothing.
    /// A client that keeps sending after its head makes the close a reset, which may discard
    /// the refusal before the client reads it; memory is bounded either way.
    private func refuse(_ switching: ProtocolSwitch, context: ChannelHandlerContext) {
        context.close(mode: .input, promise: nil)
        var fields: HTTPFields = [.connection: "close"]
        // An answer to CONNECT has no body in HTTP/1.1 (NIO's encoder drops one): the status says it.
        let body = switching == .connect ? nil : ByteBuffer(string: switching.explanation)
        if let body {
            fields[.contentType] = "text/plain; charset=utf-8"
            fields[.contentLength] = "\(body.readableBytes)"
        } else {
            fields[.allow] = "GET, POST"
        }
        let head = HTTPResponse(status: HTTPResponse.Status(code: switching.status), headerFields: fields)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let body { context.write(wrapOutboundOut(.body(body)), promise: nil) }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let limit = state.bounds.writeTimeout.components
        writeTimer = context.eventLoop.scheduleTask(in: .nanoseconds(limit.seconds * 1_000_000_000 + limit.attoseconds / 1_000_000_000)) {
            bound.value.close(promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
    }

    /// A timer on the connection's event loop that, when it fires, closes the connection unless
    /// the state says otherwise.
    private func schedule(_ closure: ConnectionClosure, after limit: Duration, context: ChannelHandlerContext) -> Scheduled<Void> {
        let nanoseconds = limit.components.seconds * 1_000_000_000 + limit.components.attoseconds / 1_000_000_000
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        return context.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) {
            let (handler, context) = bound.value
            handler.perform(handler.state.timerFired(closure), context: context)
        }
    }
}

import Decisions
import NIOCore
import NIOHTTPTypes

/// The I/O of `ConnectionGuardState` on one connection: after Hummingbird's HTTP/1 decoding, it
/// sees each request part read and each answer part written. `onClose` counts a closure.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var state: ConnectionGuardState
    private var requestTimer: Scheduled<Void>?
    private var writeTimer: Scheduled<Void>?
    private let onClose: @Sendable (ConnectionClosure) -> Void

    init(bounds: ConnectionBounds, onClose: @escaping @Sendable (ConnectionClosure) -> Void) {
        self.state = ConnectionGuardState(bounds: bounds)
        self.onClose = onClose
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !state.closed else { return }  // closing: nothing more is decoded into memory
        let action: ConnectionGuardState.Action =
            switch unwrapInboundIn(data) {
            case .head: state.requestHead()
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

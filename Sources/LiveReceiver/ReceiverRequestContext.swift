package import Hummingbird
package import NIOCore

/// Hummingbird's basic context, and the connection: `serve` ends a slow body's input.
package struct ReceiverRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage
    package let channel: any Channel

    package init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        channel = source.channel
    }
}

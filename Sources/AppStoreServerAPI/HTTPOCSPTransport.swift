public import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
public import SignedData

/// Carries OCSP requests over HTTP (RFC 6960 appendix A: POST, `application/ocsp-request`),
/// with a deadline and a bound on the answer's size. Any failure to get a 200 answer throws,
/// which the verifier reports as "retry later".
public struct HTTPOCSPTransport: OCSPTransport {
    public var httpClient: HTTPClient
    public var timeout: Duration
    public var maximumResponseBytes: Int

    public init(httpClient: HTTPClient = .shared, timeout: Duration = .seconds(10), maximumResponseBytes: Int = 64 * 1024) {
        self.httpClient = httpClient
        self.timeout = timeout
        self.maximumResponseBytes = maximumResponseBytes
    }

    public func send(request: [UInt8], to uri: String) async throws -> [UInt8] {
        var httpRequest = HTTPClientRequest(url: uri)
        httpRequest.method = .POST
        httpRequest.headers.add(name: "Content-Type", value: "application/ocsp-request")
        httpRequest.headers.add(name: "Accept", value: "application/ocsp-response")
        httpRequest.body = .bytes(ByteBuffer(bytes: request))
        let response = try await httpClient.execute(httpRequest, timeout: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000))
        guard response.status == .ok else {
            throw OCSPTransportError(description: "the OCSP responder answered HTTP \(response.status.code)")
        }
        let body = try await response.body.collect(upTo: maximumResponseBytes)
        return Array(body.readableBytesView)
    }
}

public struct OCSPTransportError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

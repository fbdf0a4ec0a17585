#if canImport(Glibc)
public import Glibc
#endif
import Foundation

/// A plain TCP client of `serve` as an attacker drives one: bytes sent when it likes, answers
/// read or never read, and what the server process holds meanwhile (from /proc). Shared by the
/// tests of serve's limits and the benchmark's attacks on serve, which need more load than a test.
public enum RawConnection {
    public struct SocketFailed: Error { public var errno: Int32 }

    /// A blocking TCP connection to 127.0.0.1:`port`.
    public static func connect(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let failure = errno
            close(descriptor)
            throw SocketFailed(errno: failure)
        }
        return descriptor
    }

    /// Sends `text`, blocking until the socket took it (or the peer is gone).
    public static func send(_ descriptor: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Sends as much of `bytes` as the socket takes now, never blocking: a client that is never
    /// read from must not block its sender.
    public static func sendWithoutWaiting(_ descriptor: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }

    /// Whether the server closed the connection: what it sent is read, then the end (or a reset).
    public static func closedByServer(_ descriptor: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 { continue }
            if count == 0 { return true }
            return errno != EAGAIN && errno != EWOULDBLOCK
        }
    }

    /// What the connection received, read until the server closed it or `limit` passed.
    public static func received(_ descriptor: Int32, within limit: Duration) async -> (text: String, closed: Bool) {
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        let end = ContinuousClock.now + limit
        while ContinuousClock.now < end {
            let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                text += String(decoding: buffer[..<count], as: UTF8.self)
            } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                return (text, true)
            } else {
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        return (text, false)
    }

    /// Whether the server ended the connection (its FIN or a reset), without reading what it sent.
    public static func peerClosed(_ descriptor: Int32) -> Bool {
        let readHangUp: Int16 = 0x2000  // POLLRDHUP (Linux; Glibc exports it only with _GNU_SOURCE)
        var entry = pollfd(fd: descriptor, events: readHangUp, revents: 0)
        guard poll(&entry, 1, 0) > 0 else { return false }
        return entry.revents & (readHangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0
    }

    /// A client dripping a byte every 250 ms for up to 10 s, reading what comes: all it read, and
    /// whether the server closed the connection.
    public static func drippedUntilClosed(_ descriptor: Int32) async -> (text: String, closed: Bool) {
        var answer = (text: "", closed: false)
        var text = ""
        for _ in 0..<40 where !answer.closed {
            send(descriptor, "A")
            answer = await received(descriptor, within: .milliseconds(250))
            text += answer.text
        }
        return (text, answer.closed)
    }

    /// Streams zeros at full speed, never blocking, until `limit` bytes are sent, the server ends
    /// the connection (a reset or a broken pipe, or its FIN seen), or `within` passes: the bytes
    /// the socket took, and how long after the start the server was seen to end it (nil: never).
    public static func stream(_ descriptor: Int32, upTo limit: Int, within: Duration) async -> (sent: Int, closedAfter: Duration?) {
        let chunk = [UInt8](repeating: 0, count: 1 << 20)
        let start = ContinuousClock.now
        var sent = 0
        while sent < limit, ContinuousClock.now < start + within {
            let count = chunk.withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, min($0.count, limit - sent), Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if count > 0 {
                sent += count
                continue
            }
            if count < 0, errno != EAGAIN, errno != EWOULDBLOCK { return (sent, ContinuousClock.now - start) }
            if peerClosed(descriptor) { return (sent, ContinuousClock.now - start) }
            try? await Task.sleep(for: .milliseconds(2))
        }
        // All sent (or time is up): wait what is left of `within` for the server to end it.
        while ContinuousClock.now < start + within {
            if peerClosed(descriptor) { return (sent, ContinuousClock.now - start) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return (sent, nil)
    }

    /// The process's resident memory now (VmRSS), in bytes.
    public static func residentBytes(_ pid: pid_t) -> Int { statusKilobytes(pid, "VmRSS:") * 1024 }

    /// The process's peak resident memory (VmHWM), in bytes.
    public static func peakResidentBytes(_ pid: pid_t) -> Int { statusKilobytes(pid, "VmHWM:") * 1024 }

    /// The process's open files.
    public static func openDescriptors(_ pid: pid_t) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
    }

    static func statusKilobytes(_ pid: pid_t, _ field: String) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
            let kilobytes = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap({ Int($0) })
        else { return 0 }
        return kilobytes
    }
}

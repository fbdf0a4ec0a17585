/// Whether the private key file is readable by anyone but the process that reads it, judged from
/// its mode and group: the words of the warning, or nil. A pure decision (`Settings` reads the
/// file's attributes and the process's group).
///
/// Readable by all: always a warning. Readable by its group: a warning unless that group is the
/// reading process's own primary group, as in Kubernetes, where `fsGroup` gives a Secret's files
/// to the pod's group (mode 0440 from `defaultMode: 0400`) and no one else is in it; on a host,
/// a service user's own group is private to it the same way.
package enum KeyFileExposure {
    package static func warning(path: String, mode: Int, fileGroup: UInt32?, processGroup: UInt32) -> String? {
        let shown = String(mode & 0o777, radix: 8)
        if mode & 0o007 != 0 {
            return "warning: the private key \(path) is readable by other users (mode \(shown)); chmod 600 it"
        }
        if mode & 0o070 != 0, fileGroup != processGroup {
            return "warning: the private key \(path) is readable by other users (mode \(shown), group \(fileGroup.map(String.init) ?? "unknown")); chmod 600 it"
        }
        return nil
    }
}

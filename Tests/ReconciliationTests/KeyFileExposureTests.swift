import Deployment
import Reconciliation
import Testing

/// The private key's permissions: who besides the reading process could read it.
@Suite("The private key file's exposure")
struct KeyFileExposureTests {
    @Test func readableByAllOrByAnotherGroupIsWarnedAndByTheProcesssOwnGroupOrItsOwnerOnlyIsNot() {
        let path = "/run/secrets/key.p8"
        #expect(KeyFileExposure.warning(path: path, mode: 0o644, fileGroup: 1000, processGroup: 1000)?.contains("readable by other users (mode 644)") == true)
        #expect(KeyFileExposure.warning(path: path, mode: 0o604, fileGroup: 1000, processGroup: 1000) != nil, "readable by all, whatever its group")
        #expect(KeyFileExposure.warning(path: path, mode: 0o640, fileGroup: 50, processGroup: 1000)?.contains("(mode 640, group 50)") == true)
        #expect(KeyFileExposure.warning(path: path, mode: 0o640, fileGroup: nil, processGroup: 1000) != nil, "a group it cannot tell")
        // Kubernetes: a Secret mounted with defaultMode 0400 under fsGroup 10001 is 0440, group
        // 10001, read by a process whose group is 10001.
        #expect(KeyFileExposure.warning(path: path, mode: 0o440, fileGroup: 10001, processGroup: 10001) == nil)
        #expect(KeyFileExposure.warning(path: path, mode: 0o600, fileGroup: 50, processGroup: 1000) == nil)
        #expect(KeyFileExposure.warning(path: path, mode: 0o400, fileGroup: 50, processGroup: 1000) == nil)
    }
}

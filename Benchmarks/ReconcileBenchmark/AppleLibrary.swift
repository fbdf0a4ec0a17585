import AppStoreSimulator
import Foundation
import SwiftASN1
import ThrowawayPostgres
import X509

/// Apple's App Store Server Library for Python, from PyPI, in a virtual environment the
/// benchmark makes itself, verifying the same notifications with the same root.
enum AppleLibrary {
    static let version = "3.1.2"

    struct Figures {
        var fullPerCPUSecond: Double
        var singlePerCPUSecond: Double
    }

    /// Installs the library (once) into `.build/apple-library-venv`.
    static func prepare(root: String) throws -> String {
        let venv = root + "/.build/apple-library-venv"
        let python = venv + "/bin/python"
        if !FileManager.default.isExecutableFile(atPath: python) {
            say("Installing app-store-server-library \(version) from PyPI into \(venv)…")
            let made = try ChildProcess.run("/usr/bin/env", ["python3", "-m", "venv", venv])
            guard made.status == 0 else { throw BenchmarkError("python3 -m venv failed: \(made.standardError)") }
        }
        let check = try ChildProcess.run(python, ["-c", "import appstoreserverlibrary"])
        if check.status != 0 {
            let installed = try ChildProcess.run(python, ["-m", "pip", "install", "-q", "app-store-server-library==\(version)"])
            guard installed.status == 0 else { throw BenchmarkError("pip install app-store-server-library failed: \(installed.standardError)") }
        }
        return python
    }

    static func measure(_ figures: VerificationFigures, root: String, seconds: Double) throws -> Figures {
        let python = try prepare(root: root)
        var serializer = DER.Serializer()
        try serializer.serialize(figures.pki.root)
        let input: [String: Any] = [
            "root": Data(serializer.serializedBytes).base64EncodedString(), "bundleId": VerificationFigures.bundleId,
            "appAppleId": VerificationFigures.appAppleId, "environment": "Production", "notifications": figures.notifications,
        ]
        let path = NSTemporaryDirectory() + "apple-library-benchmark-\(UUID().uuidString).json"
        try JSONSerialization.data(withJSONObject: input).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try ChildProcess.run(python, [root + "/Benchmarks/apple_library_benchmark.py", path, String(seconds)])
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Double],
            let full = object["fullPerCPUSecond"], let single = object["singlePerCPUSecond"]
        else { throw BenchmarkError("Apple's library failed to verify the benchmark's notifications: \(result.standardError.suffix(2000))") }
        return Figures(fullPerCPUSecond: full, singlePerCPUSecond: single)
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

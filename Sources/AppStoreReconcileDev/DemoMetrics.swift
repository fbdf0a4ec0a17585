import AppStoreSimulator
import Foundation

/// The demo's last question: what did the outage do to the numbers? `metrics` over the week, once
/// before the recovery and once after, and each App Store's MRR and active subscriptions at the
/// end of today side by side.
enum DemoMetrics {
    /// The products' durations for the configuration: the simulator's renewals are a day apart,
    /// Sandbox-style, so nothing derives from the periods.
    static func products(_ world: SimulatedDeployment) -> String {
        var lines = ["products:"]
        for bundleId in Set(world.worlds.map(\.scenario.configuration.bundleId)).sorted() {
            for (suffix, duration) in [(".monthly", "P1M"), (".annual", "P1Y"), (".addon.monthly", "P1M"), (".family.monthly", "P1M")] {
                lines.append("  \(bundleId)\(suffix): \(duration)")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func run(_ name: String, title: String, config: String, reportDir: String, databaseURL: String) async throws {
        let arguments = ["metrics", "--config", config, "--interval", "day", "--from", Date().addingTimeInterval(-7 * 86_400).formatted(.iso8601.year().month().day()), "--report-dir", "\(reportDir)/\(name)"]
        print("\n\(title)\n  $ appstore-reconcile \(arguments.joined(separator: " "))")
        let status = try await DemoDeployment.runTool(arguments, databaseURL: databaseURL)
        guard status == 0 else { throw DemoFailure("appstore-reconcile metrics exited \(status)") }
    }

    /// Each App Store's last interval before and after, from the two runs' metrics.json.
    static func compare(reportDir: String) throws {
        func last(_ name: String) throws -> [String: (mrr: Double, active: Int)] {
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(reportDir)/\(name)/metrics.json"))
            let rows = ((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["rows"] as? [[String: Any]]) ?? []
            var found: [String: (mrr: Double, active: Int)] = [:]
            for row in rows {
                let key = "\(row["bundle_id"] as? String ?? "") \(row["environment"] as? String ?? "") \(row["currency"] as? String ?? "")"
                found[key] = (row["mrr"] as? Double ?? 0, row["active_subscriptions"] as? Int ?? 0)
            }
            return found
        }
        let before = try last("metrics-before"), after = try last("metrics-after")
        print("\nWhat the outage did to the numbers (at the end of today, before the recovery → after it):")
        for key in Set(before.keys).union(after.keys).sorted() {
            let was = before[key] ?? (0, 0), now = after[key] ?? (0, 0)
            print(String(format: "  %@: MRR %.2f → %.2f, active subscriptions %d → %d", key, was.mrr, now.mrr, was.active, now.active))
        }
    }
}

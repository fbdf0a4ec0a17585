import AppStoreSimulator
import Foundation

/// The demo's last step: the subscribers the outage locked out (a renewal the live server missed,
/// recorded by the run hours later, still active now), listed by `compensate --dry-run` with the
/// days each would get; nothing is sent to the simulated Apple.
enum DemoCompensation {
    static func dryRun(world: SimulatedDeployment, config: String, reportDir: String, databaseURL: String) async throws {
        guard let outage = world.worlds.first?.scenario.configuration.outage else { return }
        // UNIX milliseconds, so that the window is the outage to the millisecond.
        let start = String(Int64((outage.lowerBound.timeIntervalSince1970 * 1000).rounded(.down)))
        let end = String(Int64((outage.upperBound.timeIntervalSince1970 * 1000).rounded(.up)))
        let arguments = ["compensate", "--config", config, "--start", start, "--end", end, "--dry-run", "--report-dir", "\(reportDir)/compensate", "--no-progress"]
        print(
            "\nMake good: subscribers whose renewal the servers missed were denied access from the end of their old period until the run "
                + "recorded it. Apple charges renewals up to 24 hours early, so a renewal recorded before the old period ran out denied nothing "
                + "and gets nothing. Who, for how long, and the days of Extend a Subscription Renewal Date each would get (reason: service "
                + "issue or outage), sending nothing:\n"
                + "  $ appstore-reconcile \(arguments.joined(separator: " "))"
        )
        let status = try await DemoDeployment.runTool(arguments, databaseURL: databaseURL)
        guard status == 0 else { throw DemoFailure("appstore-reconcile compensate --dry-run exited \(status)") }
    }
}

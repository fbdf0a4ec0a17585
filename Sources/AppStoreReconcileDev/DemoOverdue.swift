import Foundation

/// The demo's view of what Apple owes: `status` counts, per App Store, the subscriptions whose
/// next notification (a renewal, a billing failure, an expiry) is more than an hour past due with
/// nothing recorded since. Before the recovery those are the outage's losses, seen without
/// knowing the outage; after it, what is left.
enum DemoOverdue {
    static func show(_ title: String, databaseURL: String) async throws {
        let arguments = ["status", "--limit", "0"]
        print("\n\(title)\n  $ appstore-reconcile \(arguments.joined(separator: " "))")
        let status = try await DemoDeployment.runTool(arguments, databaseURL: databaseURL)
        guard status == 0 else { throw DemoFailure("appstore-reconcile status exited \(status)") }
    }
}

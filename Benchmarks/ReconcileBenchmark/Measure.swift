import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// CPU seconds (user and system) this process has used.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

struct Rate {
    var operations: Int
    var wallSeconds: Double
    var cpuSeconds: Double
    var perWallSecond: Double { Double(operations) / wallSeconds }
    var perCPUSecond: Double { Double(operations) / cpuSeconds }
}

/// Runs `body` (one batch of `batch` operations) until `seconds` of wall time have passed.
func measure(seconds limit: Double, batch: Int, _ body: () async -> Void) async -> Rate {
    await body()  // warm up
    let cpuStart = cpuSeconds()
    let start = ContinuousClock.now
    var operations = 0
    while ContinuousClock.now - start < .seconds(limit) {
        await body()
        operations += batch
    }
    return Rate(operations: operations, wallSeconds: seconds(ContinuousClock.now - start), cpuSeconds: cpuSeconds() - cpuStart)
}

/// One line of the results table: a figure, and the target it is held to when it has one.
struct Row {
    var section: String
    var figure: String
    var value: String
    var target: String = ""
    var met: Bool?
}

func printTable(_ rows: [Row]) {
    let widths = (
        rows.map(\.section.count).max() ?? 0, rows.map(\.figure.count).max() ?? 0, rows.map(\.value.count).max() ?? 0,
        rows.map(\.target.count).max() ?? 0
    )
    func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: width, withPad: " ", startingAt: 0) }
    print("")
    print("\(pad("part", widths.0))  \(pad("figure", widths.1))  \(pad("value", widths.2))  \(pad("target", widths.3))  result")
    for row in rows {
        let result = row.met.map { $0 ? "met" : "NOT met" } ?? ""
        print("\(pad(row.section, widths.0))  \(pad(row.figure, widths.1))  \(pad(row.value, widths.2))  \(pad(row.target, widths.3))  \(result)")
    }
}

func number(_ value: Double, _ decimals: Int = 0) -> String { String(format: "%.\(decimals)f", value) }

/// Prints a progress line at once, even into a pipe.
func say(_ line: String) {
    print(line)
    fflush(nil)
}

import Foundation

// CPU time as the kernel charged it: this process, the machine, and other processes.

/// CPU time read from the kernel.
enum CPUTime {
    /// This process's user and system time, every thread.
    static func process() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// The machine's busy time over all cores (/proc/stat: all but idle and iowait).
    static func machine() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") })
        else { return .nan }
        let fields = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard fields.count >= 8 else { return .nan }
        // user nice system idle iowait irq softirq steal
        let busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
        return busy / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

/// CPU milliseconds per notification answered 200 during a closed loop, as the kernel charged
/// them: the receiver's own processes, PostgreSQL's, and the rest of the machine (the load
/// generator, this benchmark, anything else running).
struct CPUCost {
    var receiver = Double.nan
    var database = Double.nan
    var rest = Double.nan
    /// What recording one notification costs: the receiver and its database.
    var recording: Double { receiver + database }
}

/// CPU seconds so far: the machine's busy time, the receiver's processes (`service` and its
/// children), and one PostgreSQL cluster's (its postmaster, the processes it runs, and those of
/// them that ended: the postmaster's children's time).
struct CPUSample {
    var machine: Double
    var receiver: Double
    var database: Double

    static func take(service: pid_t, database postmaster: pid_t) -> CPUSample {
        var receiver = 0.0
        var database = 0.0
        for process in ProcessCPU.all() {
            if process.pid == service || process.parent == service { receiver += process.seconds }
            if process.pid == postmaster { database += process.seconds + process.endedChildrenSeconds }
            if process.parent == postmaster { database += process.seconds }
        }
        return CPUSample(machine: CPUTime.machine(), receiver: receiver, database: database)
    }

    static func cost(from start: CPUSample, to end: CPUSample, answered: Int) -> CPUCost {
        guard answered > 0 else { return CPUCost() }
        let perNotification = 1000 / Double(answered)
        let receiver = end.receiver - start.receiver
        let database = end.database - start.database
        return CPUCost(
            receiver: receiver * perNotification, database: database * perNotification,
            rest: max(0, (end.machine - start.machine) - receiver - database) * perNotification
        )
    }

    /// The postmaster's pid: the first line of `postmaster.pid` in the cluster's data directory.
    static func postmaster(of dataDirectory: String) throws -> pid_t {
        let text = try String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8)
        guard let line = text.split(separator: "\n").first, let pid = pid_t(line) else {
            throw BenchmarkError("no postmaster pid in \(dataDirectory)/postmaster.pid")
        }
        return pid
    }
}

/// Every process's CPU seconds, from /proc/PID/stat (utime and stime, all its threads).
enum ProcessCPU {
    struct Process {
        var pid: pid_t
        var parent: pid_t
        var seconds: Double
        /// cutime and cstime: the time of its children that ended and were waited for.
        var endedChildrenSeconds: Double
    }

    static func all() -> [Process] {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Process? in
            guard let pid = pid_t(entry), let text = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = text.lastIndex(of: ")")
            else { return nil }
            // After "(comm)": state, ppid, …, then utime, stime, cutime, cstime (indices 11 to 14).
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 14, let parent = pid_t(fields[1]), let user = Double(fields[11]), let system = Double(fields[12]),
                let childrenUser = Double(fields[13]), let childrenSystem = Double(fields[14])
            else { return nil }
            return Process(pid: pid, parent: parent, seconds: (user + system) / ticks, endedChildrenSeconds: (childrenUser + childrenSystem) / ticks)
        }
    }
}

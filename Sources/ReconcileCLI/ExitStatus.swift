import ArgumentParser
import FailureKind

/// Exit codes are part of the interface: cron, systemd and Kubernetes act on them.
enum ExitStatus {
    /// Done.
    static let success: Int32 = 0
    /// Anything else: an unexpected failure, a migration that refuses to run.
    static let failure: Int32 = 1
    /// Done, with problems: some payloads were rejected or left for retry, or Apple could not
    /// answer for some accounts in pass 2 (4040001, 4000006, 4040010, retries exhausted); every
    /// other account was repaired. The report lists each.
    static let doneWithRejections: Int32 = 3
    /// `ingest`: the notification was already in the ledger.
    static let duplicate: Int32 = 4
    /// Bad usage: unknown flag, invalid argument.
    static let usage: Int32 = 64
    /// The payload given to `verify` or `ingest` was rejected.
    static let payloadRejected: Int32 = 65
    /// The input file could not be read.
    static let noInput: Int32 = 66
    /// A temporary failure: Apple or the database unreachable, a revocation check that could
    /// not be completed. Try again later.
    static let temporaryFailure: Int32 = 75
    /// Stopped by SIGTERM or SIGINT after committing the batch in hand (128 + SIGINT, the shell's
    /// convention for an interrupted command).
    static let interrupted: Int32 = 130
    /// A configuration error: a setting missing or malformed, credentials refused.
    static let configuration: Int32 = 78

    static let summary = """
        Exit codes: 0 done; 1 unexpected failure; 3 done with problems (payloads rejected or left for retry, accounts Apple could not answer for, refund requests not answered for invalid facts or Apple's refusal, input lines an import could not use, or a customer whose ledger differs from Apple: see the report); \
        4 ingest: already recorded; 64 usage error; 65 the payload given to verify or ingest was rejected; 66 input not readable; \
        75 temporary failure (Apple or the database unavailable, or another run in progress: try again later); \
        78 configuration error; 130 stopped by SIGTERM or SIGINT after committing the batch in hand (run again to finish).
        """

    /// The exit status of a failure of `kind`: the one table every command's failures go through
    /// (`withExitStatus`).
    static func of(_ kind: FailureKind) -> Int32 {
        switch kind {
        case .usage: usage
        case .configuration: configuration
        case .rejected: payloadRejected
        case .temporary: temporaryFailure
        case .interrupted: interrupted
        case .unexpected: failure
        }
    }
}

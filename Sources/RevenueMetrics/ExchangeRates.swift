package import Foundation

/// `--rates`: the rate of each currency the ledger holds in one currency, for a total row per App
/// Store and interval. A CSV file: a header `currency,<TARGET>` (the currency of the totals), then
/// one line per currency, `EUR,1.08` (1 EUR is 1.08 of the target). The target's own rate is 1.
package struct ExchangeRates: Sendable, Equatable {
    package var target: String
    package var rates: [String: Decimal]

    package struct Problem: Error, Equatable, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    /// Reads the file's text; a problem names the line.
    package init(csv text: String) throws(Problem) {
        var lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        guard !lines.isEmpty else { throw Problem(description: "is empty: expected a header `currency,<TARGET>` and a line `CUR,rate` per currency") }
        let header = lines.removeFirst().split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard header.count == 2, header[0].lowercased() == "currency", Self.isCurrency(header[1]) else {
            throw Problem(description: "line 1: expected the header `currency,<TARGET>` (TARGET an ISO 4217 code such as USD)")
        }
        target = header[1]
        rates = [target: 1]
        for (index, line) in lines.enumerated() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard fields.count == 2, Self.isCurrency(fields[0]), let rate = Decimal(string: fields[1], locale: Locale(identifier: "en_US_POSIX")),
                rate > 0, fields[1].allSatisfy({ $0.isNumber || $0 == "." })
            else {
                throw Problem(description: "line \(index + 2): expected `CUR,rate` (a code such as EUR, a positive decimal rate), not '\(line.prefix(40))'")
            }
            rates[fields[0]] = rate
        }
    }

    static func isCurrency(_ text: String) -> Bool {
        text.count == 3 && text.allSatisfy { $0.isASCII && $0.isUppercase }
    }

    /// The currencies of `rows` without a rate, sorted.
    package func missing(in rows: [MetricsRow]) -> [String] {
        Set(rows.map(\.currency)).subtracting(rates.keys).sorted()
    }

    /// A total row per App Store and interval: counts added, amounts converted to the target and
    /// rounded to the milliunit. Every currency of `rows` must have a rate (`missing`).
    package func totals(of rows: [MetricsRow]) -> [MetricsRow] {
        struct Key: Hashable { var bundleId: String, environment: String, start: Date }
        var order: [Key] = []
        var totals: [Key: MetricsRow] = [:]
        for row in rows where !row.isTotal {
            let key = Key(bundleId: row.bundleId, environment: row.environment, start: row.intervalStart)
            let rate = rates[row.currency] ?? 0
            func convert(_ milliunits: Int64) -> Int64 {
                var exact = Decimal(milliunits) * rate
                var rounded = Decimal()
                NSDecimalRound(&rounded, &exact, 0, .plain)
                return NSDecimalNumber(decimal: rounded).int64Value
            }
            var total = totals[key] ?? {
                order.append(key)
                var fresh = MetricsRow(bundleId: row.bundleId, environment: row.environment, intervalStart: row.intervalStart, intervalEnd: row.intervalEnd, currency: target)
                fresh.isTotal = true
                return fresh
            }()
            total.activeSubscriptions += row.activeSubscriptions
            total.activeTrials += row.activeTrials
            total.mrr += convert(row.mrr)
            total.newSubscriptions += row.newSubscriptions
            total.trialStarts += row.trialStarts
            total.trialConversions += row.trialConversions
            total.trialsEnded += row.trialsEnded
            total.trialsEndedConverted += row.trialsEndedConverted
            total.churned += row.churned
            total.churnedVoluntary += row.churnedVoluntary
            total.churnedBilling += row.churnedBilling
            total.churnedRefund += row.churnedRefund
            total.reactivations += row.reactivations
            total.gross += convert(row.gross)
            total.refundCount += row.refundCount
            total.refundAmount += convert(row.refundAmount)
            total.estimatedProceeds += convert(row.estimatedProceeds)
            total.activeUnnormalised += row.activeUnnormalised
            total.proceedsEstimated += row.proceedsEstimated
            totals[key] = total
        }
        return order.compactMap { totals[$0] }
    }
}

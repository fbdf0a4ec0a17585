import Foundation

/// How wrong the ledger can be, from an audit's sample (issue 64, point 2): the exact binomial
/// (Clopper–Pearson) one-sided upper bound, at 95% confidence, of the share of accounts that differ
/// from Apple, given `differing` of `sampled` accounts did. It is the share p at which seeing
/// `differing` or fewer would happen only 5% of the time: 0 of 3,000 gives 1 − 0.05^(1/3000),
/// just under 0.1%. A sample drawn without replacement from a finite ledger makes it conservative
/// (the true bound of a census is its share); it never overstates the ledger's correctness.
package enum AuditBound {
    /// The confidence the bound is stated at.
    package static let confidence = 0.95

    /// The upper bound of the share that differs, in 0...1; nil when nothing was sampled (no
    /// statement can be made).
    package static func upperBound95(differing: Int, sampled: Int) -> Double? {
        guard sampled > 0 else { return nil }
        let x = max(0, min(differing, sampled))
        guard x < sampled else { return 1 }
        let alpha = 1 - confidence
        if x == 0 { return 1 - pow(alpha, 1 / Double(sampled)) }
        // P(X ≤ x; n, p) falls as p rises: bisect for the p where it equals alpha.
        var low = Double(x) / Double(sampled)
        var high = 1.0
        for _ in 0..<200 {
            let middle = (low + high) / 2
            if binomialCDF(x, sampled, middle) > alpha { low = middle } else { high = middle }
            if high - low < 1e-12 { break }
        }
        return high
    }

    /// P(X ≤ x) for X ~ Binomial(n, p), summed in logarithms (n in the millions stays exact enough).
    static func binomialCDF(_ x: Int, _ n: Int, _ p: Double) -> Double {
        guard p > 0 else { return 1 }
        guard p < 1 else { return x >= n ? 1 : 0 }
        let logP = log(p)
        let logQ = log1p(-p)
        var terms: [Double] = []
        terms.reserveCapacity(x + 1)
        // log C(n, i), from C(n, 0) = 1 by C(n, i + 1) = C(n, i) · (n − i) / (i + 1).
        var logChoose = 0.0
        for i in 0...x {
            if i > 0 { logChoose += log(Double(n - i + 1)) - log(Double(i)) }
            terms.append(logChoose + Double(i) * logP + Double(n - i) * logQ)
        }
        let largest = terms.max() ?? 0
        let sum = terms.reduce(0) { $0 + exp($1 - largest) }
        return min(1, exp(largest) * sum)
    }
}

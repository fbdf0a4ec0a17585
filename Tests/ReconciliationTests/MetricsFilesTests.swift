import Foundation
import Reports
import RevenueMetrics
import Testing

@Suite("metrics' files: the fields in order, amounts as decimals")
struct MetricsFilesTests {
    @Test func amountsAreTheCurrencysUnitsWithoutTrailingZeros() {
        #expect(MetricsFiles.amount(9_990) == "9.99" && MetricsFiles.amount(4_000) == "4" && MetricsFiles.amount(-5) == "-0.005")
        #expect(MetricsFiles.amount(0) == "0" && MetricsFiles.amount(1_234_567) == "1234.567" && MetricsFiles.amount(-4_999) == "-4.999")
    }

    @Test func theJSONAndTheCSVCarryTheNamedFieldsInTheirOrder() throws {
        var row = MetricsRow(bundleId: "com.example.app", environment: "Production", intervalStart: Date(timeIntervalSince1970: 1_798_761_600),
            intervalEnd: Date(timeIntervalSince1970: 1_798_848_000), currency: "USD")
        row.mrr = 9_990
        row.gross = 4_990
        row.refundAmount = 1_000
        row.trialsEnded = 3
        row.trialsEndedConverted = 2
        let result = MetricsResult(rows: [row], unnormalised: [], choices: MetricsChoices(), from: row.intervalStart, to: row.intervalEnd)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(MetricsFiles.json(result).utf8)) as? [String: Any])
        let rows = try #require(object["rows"] as? [[String: Any]])
        #expect(rows.count == 1)
        #expect(rows[0]["interval_start"] as? String == "2027-01-01T00:00:00Z" && rows[0]["mrr"] as? Double == 9.99 && rows[0]["arr"] as? Double == 119.88)
        #expect(rows[0]["net"] as? Double == 3.99 && rows[0]["trial_conversion_rate"] as? Double == 0.6667)
        let csv = MetricsFiles.csv(result).split(separator: "\n").map(String.init)
        #expect(csv[0].hasPrefix("bundle_id,environment,interval_start,interval_end,currency,active_subscriptions,active_trials,mrr,arr,new_subscriptions,trial_starts,trial_conversions,trial_conversion_rate,churned,churned_voluntary,churned_billing,churned_refund,reactivations,gross,refund_count,refund_amount,net,estimated_proceeds"))
        #expect(csv[1] == "com.example.app,Production,2027-01-01T00:00:00Z,2027-01-02T00:00:00Z,USD,0,0,9.99,119.88,0,0,0,0.6667,0,0,0,0,0,4.99,0,1,3.99,0,false,0,0")
    }
}

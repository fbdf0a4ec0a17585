/// What the team's facts query returned for one refund request: one row, its columns by the
/// names the facts file's contract gives them (`customer_consented`, `delivery_status`,
/// `sample_content_provided`, `consumption_percentage`, `refund_preference`); NULL is nil.
package struct ConsumptionFacts: Hashable, Sendable {
    package var customerConsented: Bool?
    package var deliveryStatus: String?
    package var sampleContentProvided: Bool?
    package var consumptionPercentage: Int64?
    package var refundPreference: String?

    package init(
        customerConsented: Bool?, deliveryStatus: String?, sampleContentProvided: Bool?, consumptionPercentage: Int64? = nil,
        refundPreference: String? = nil
    ) {
        self.customerConsented = customerConsented
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }
}

package import Foundation

/// `--price-points`: Apple's own proceeds for the prices a team charges, as App Store Connect
/// gives them (App Store Connect API, "List all price points for a subscription",
/// developer.apple.com/documentation/appstoreconnectapi/get-v1-subscriptions-_id_-pricepoints:
/// `GET /v1/subscriptions/{id}/pricePoints?filter[territory]=…`: each point's
/// `customerPrice`, `proceeds` and `proceedsYear2`, and its territory, an ISO 3166-1 alpha-3
/// code such as USA, the code a transaction's `storefront` carries). A CSV file with the header
/// `product_id,territory,customer_price,proceeds,proceeds_year2` and one line per point, amounts
/// as App Store Connect writes them (`4.99`). A paid period whose product, storefront and price
/// match a point earns its `proceeds` (or `proceeds_year2` after a year of paid service, or
/// throughout under the Small Business Program) instead of the 70% / 85% estimate.
package struct PricePoints: Sendable, Equatable {
    package struct Point: Sendable, Equatable, Hashable {
        package var productId: String
        package var territory: String
        /// Milliunits of the territory's currency, as a transaction's price.
        package var customerPrice: Int64
        package var proceeds: Int64
        package var proceedsYear2: Int64

        package init(productId: String, territory: String, customerPrice: Int64, proceeds: Int64, proceedsYear2: Int64) {
            self.productId = productId
            self.territory = territory
            self.customerPrice = customerPrice
            self.proceeds = proceeds
            self.proceedsYear2 = proceedsYear2
        }
    }

    package struct Problem: Error, Equatable, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    /// The header a file starts with.
    package static let header = "product_id,territory,customer_price,proceeds,proceeds_year2"
    /// The largest file read: the points of the prices a team charges are a few thousand lines;
    /// every tier of every territory of a product is about 140,000.
    package static let maximumBytes = 64 << 20

    /// In the file's order, each (product, territory, price) once.
    package private(set) var points: [Point] = []

    package init(points: [Point]) {
        self.points = points
    }

    /// Reads the file's text; a problem names the line.
    package init(csv text: String) throws(Problem) {
        var number = 0
        var seen: [Point: Int] = [:]
        var headerRead = false
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            number += 1
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let fields = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard headerRead else {
                guard fields.map({ $0.lowercased() }) == Self.header.split(separator: ",").map(String.init) else {
                    throw Problem(description: "line \(number): expected the header `\(Self.header)`")
                }
                headerRead = true
                continue
            }
            guard fields.count == 5, !fields[0].isEmpty, fields[0].count <= 200, Self.isTerritory(fields[1]),
                let price = Self.milliunits(fields[2]), price > 0, let proceeds = Self.milliunits(fields[3]),
                let year2 = Self.milliunits(fields[4]), proceeds <= price, year2 <= price
            else {
                throw Problem(
                    description: "line \(number): expected `product_id,territory,customer_price,proceeds,proceeds_year2` (a territory such as USA, a positive price, proceeds not above it, at most 3 decimals), not '\(line.prefix(60))'"
                )
            }
            let key = Point(productId: fields[0], territory: fields[1], customerPrice: price, proceeds: 0, proceedsYear2: 0)
            let point = Point(productId: fields[0], territory: fields[1], customerPrice: price, proceeds: proceeds, proceedsYear2: year2)
            if let earlier = seen[key] {
                guard points[earlier] == point else {
                    throw Problem(description: "line \(number): \(fields[0]) \(fields[1]) at \(fields[2]) is given again with other proceeds")
                }
                continue
            }
            seen[key] = points.count
            points.append(point)
        }
        guard headerRead else { throw Problem(description: "is empty: expected the header `\(Self.header)` and a line per price point") }
    }

    static func isTerritory(_ text: String) -> Bool {
        text.count == 3 && text.allSatisfy { $0.isASCII && $0.isUppercase }
    }

    /// "4.99" → 4990; at most three decimals, no sign, no exponent.
    static func milliunits(_ text: String) -> Int64? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !parts[0].isEmpty, parts[0].count <= 12, parts[0].allSatisfy({ $0.isASCII && $0.isNumber }),
            let whole = Int64(parts[0])
        else { return nil }
        var fraction: Int64 = 0
        if parts.count == 2 {
            let digits = parts[1]
            guard (1...3).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            fraction = Int64(digits + String(repeating: "0", count: 3 - digits.count))!
        }
        return whole * 1000 + fraction
    }
}

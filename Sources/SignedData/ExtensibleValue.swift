/// A value Apple sends as a string from a set that grows over time (notification types,
/// subtypes, environments, ...). Unknown values decode and keep their raw string, so a new
/// Apple release never breaks decoding; compare with the named constants to act on known ones.
public protocol ExtensibleStringValue: RawRepresentable, Hashable, Sendable, Codable,
    CustomStringConvertible, ExpressibleByStringLiteral
where RawValue == String {
    init(rawValue: String)
}

extension ExtensibleStringValue {
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }
}

/// A value Apple sends as a small integer from a set that may grow (subscription status,
/// offer type, ...). Unknown values decode and keep their raw number.
public protocol ExtensibleIntegerValue: RawRepresentable, Hashable, Sendable, Codable,
    CustomStringConvertible, ExpressibleByIntegerLiteral
where RawValue == Int {
    init(rawValue: Int)
}

extension ExtensibleIntegerValue {
    public init(integerLiteral value: Int) { self.init(rawValue: value) }
    public var description: String { String(rawValue) }
}

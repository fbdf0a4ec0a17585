/// The three dot-separated parts of a compact JWS, as received. Nothing is decoded or trusted
/// here; the parts only have to exist.
struct CompactJWS {
    let text: String
    let header: Substring
    let payload: Substring
    let signature: Substring

    init?(_ text: String) {
        let parts = text.split(separator: ".", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else { return nil }
        self.text = text
        self.header = parts[0]
        self.payload = parts[1]
        self.signature = parts[2]
    }

    /// The bytes the signature covers: `header.payload` exactly as sent.
    var signingInput: Substring.UTF8View {
        text[header.startIndex..<payload.endIndex].utf8
    }
}

/// The JOSE header of an Apple signed payload.
struct JWSHeader: Decodable {
    var alg: String?
    /// Standard base64 (not base64url) DER certificates: leaf, intermediate, root.
    var x5c: [String]?
}

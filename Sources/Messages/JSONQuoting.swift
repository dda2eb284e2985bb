/// The escaping of hand-written JSON text (the JSON log lines, the chaos harness's corpus): `"` and `\` escaped,
/// `\n \r \t` as such, the other control characters as `\u00xx`, everything else as is.
public enum JSONQuoting {
    /// Appends `text` escaped, without the quotes around it.
    public static func appendEscaped(_ text: String, to line: inout String) {
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": line += "\\\""
            case "\\": line += "\\\\"
            case "\n": line += "\\n"
            case "\r": line += "\\r"
            case "\t": line += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                line += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: line.unicodeScalars.append(scalar)
            }
        }
    }
}

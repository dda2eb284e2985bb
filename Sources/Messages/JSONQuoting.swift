/// The escaping of hand-written JSON text (the JSON log lines, the chaos harness's corpus): ``JSONWriter``'s, so the
/// codebase escapes JSON strings one way.
public enum JSONQuoting {
    /// Appends `text` escaped, without the quotes around it.
    public static func appendEscaped(_ text: String, to line: inout String) {
        var writer = JSONWriter(capacity: text.utf8.count + 2)
        writer.string(text)
        line += String(decoding: writer.bytes.dropFirst().dropLast(), as: UTF8.self)
    }
}

/// The files a configuration names (a catalog, a tokens file, a secret), read through the caller's `readFile` (tests
/// inject one): a file that cannot be read is a ``ConfigurationError`` naming the key and the path, never a byte of
/// the file.
public enum ConfigurationFile {
    /// The text of the file at `path`, named by `key` (and, inside the file `key` names, by `field`).
    public static func read(
        _ path: String, key: String, field: String? = nil, with readFile: (String) throws -> String
    ) throws(ConfigurationError) -> String {
        do {
            return try readFile(path)
        } catch {
            throw ConfigurationError(key: key, problem: (field.map { "\($0): " } ?? "") + "cannot read \(path)")
        }
    }

    /// `text` without the line ends that editors and `kubectl create secret` leave at the end of a secret file.
    public static func trimmingTrailingLineEnds(_ text: String) -> String {
        String(text.reversed().drop(while: { $0 == "\n" || $0 == "\r" }).reversed())
    }
}

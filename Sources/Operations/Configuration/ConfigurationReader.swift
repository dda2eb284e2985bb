import Foundation

/// Reads typed values from merged ``ConfigurationSources``, with the table's defaults, turning each problem into one
/// ``ConfigurationError`` that names the key (never a secret's value).
public struct ConfigurationReader {
    public let sources: ConfigurationSources
    private let readFile: (String) throws -> String

    public init(
        sources: ConfigurationSources,
        readFile: @escaping (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) {
        self.sources = sources
        self.readFile = readFile
    }

    /// The value given, else the key's default; nil for a required key not given or an optional key without one.
    public func raw(_ name: String) -> String? {
        if let value = sources.values[name] { return value }
        guard let key = sources.table.key(named: name) else { return nil }
        if key.isRequired { return nil }
        return key.defaultValue
    }

    /// The value given, with no default applied (for keys whose default is a description, such as "the host name").
    public func given(_ name: String) -> String? { sources.values[name] }

    /// The key as the operator spelt it: an alias when the value was given under one.
    private func spelt(_ name: String) -> String { sources.aliasesGiven[name] ?? name }

    public func string(_ name: String) throws(ConfigurationError) -> String {
        guard let value = raw(name), !value.isEmpty else {
            throw ConfigurationError(key: spelt(name), problem: "must not be empty")
        }
        return value
    }

    public func int(_ name: String, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        try number(name, in: range, "a whole number")
    }

    public func double(_ name: String, in range: ClosedRange<Double>) throws(ConfigurationError) -> Double {
        try number(name, in: range, "a number")
    }

    /// The value of `name` read as a `Value` within `range`; `kind` names what is expected in the error.
    private func number<Value: LosslessStringConvertible & Comparable>(
        _ name: String, in range: ClosedRange<Value>, _ kind: String
    ) throws(ConfigurationError) -> Value {
        let text = try string(name)
        guard let value = Value(text), range.contains(value) else {
            throw ConfigurationError(
                key: spelt(name), problem: "expected \(kind) from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    public func bool(_ name: String) throws(ConfigurationError) -> Bool {
        switch try string(name).lowercased() {
        case "true", "1", "yes", "on": return true
        case "false", "0", "no", "off": return false
        default: throw ConfigurationError(key: name, problem: "expected true or false")
        }
    }

    public func oneOf(_ name: String, _ allowed: [String]) throws(ConfigurationError) -> String {
        let value = try string(name).lowercased()
        guard allowed.contains(value) else {
            throw ConfigurationError(key: name, problem: "expected one of \(allowed.joined(separator: ", "))")
        }
        return value
    }

    public func url(_ name: String) throws(ConfigurationError) -> String {
        let value = try string(name)
        guard Self.isHTTPURL(value) else { throw ConfigurationError(key: name, problem: "expected an http(s) URL") }
        return value
    }

    /// True for an absolute `http://` or `https://` URL with a host.
    public static func isHTTPURL(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme, scheme == "https" || scheme == "http",
            url.host != nil
        else { return false }
        return true
    }

    /// A comma-separated list, blanks dropped.
    public func list(_ name: String) -> [String] {
        (raw(name) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    public func properties(_ name: String) throws(ConfigurationError) -> [String: String] {
        try Self.properties(raw(name) ?? "", key: name)
    }

    /// Parses `name=value;name=value` (blanks around a pair dropped) as `kafka_properties` is read, for the tools that
    /// take it without a key table (`tail`, `submit`); a bad pair is an error naming `key`.
    public static func properties(_ text: String, key: String) throws(ConfigurationError) -> [String: String] {
        var properties: [String: String] = [:]
        for pair in text.split(separator: ";") {
            let trimmed = pair.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            guard let equals = trimmed.firstIndex(of: "="), equals != trimmed.startIndex else {
                throw ConfigurationError(key: key, problem: "expected name=value pairs separated by ;")
            }
            properties[String(trimmed[..<equals])] = String(trimmed[trimmed.index(after: equals)...])
        }
        return properties
    }

    /// A secret comes from its value (`VERIFY_X`) or a file (`VERIFY_X_FILE`), read here; trailing newlines are
    /// dropped, as editors and `kubectl create secret` leave them.
    public func secret(_ name: String) throws(ConfigurationError) -> String? {
        if let value = sources.values[name], !value.isEmpty { return value }
        guard let path = sources.values[name + "_file"], !path.isEmpty else { return nil }
        do {
            let text = try readFile(path)
            let trimmed = ConfigurationFile.trimmingTrailingLineEnds(text)
            guard !trimmed.isEmpty else {
                throw ConfigurationError(key: name + "_file", problem: "file is empty")
            }
            return trimmed
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError(key: name + "_file", problem: "cannot read the file")
        }
    }
}

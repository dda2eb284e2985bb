import Foundation
import Traffic

/// Python's `jsonschema` (scripts/validate-schema.py), an independent reader of the JSON Schemas in docs/schemas.
enum SchemaValidator {
    /// One line per document, in order: what the validator says of it.
    static func validate(_ documents: [[UInt8]], schema: String) async throws -> [String] {
        let root = TestEnvironment.packageRoot
        let done = try await TestCommand.run(
            [
                "python3", root.appendingPathComponent("scripts/validate-schema.py").path,
                root.appendingPathComponent("docs/schemas/\(schema)").path,
            ], input: Array(documents.map { $0 + [0x0A] }.joined()))
        guard done.succeeded else {
            throw MissingResource(
                what: "python3 with jsonschema (\(done.errors.split(separator: "\n").last ?? ""))",
                hint: "pip install jsonschema (.ci/run installs it)")
        }
        return done.output.split(separator: "\n").map(String.init)
    }
}

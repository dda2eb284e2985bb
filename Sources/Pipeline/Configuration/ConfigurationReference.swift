extension WorkerConfiguration {
    /// The configuration reference as Markdown: the text of `docs/CONFIGURATION.md`, generated from ``keys`` so the
    /// two cannot drift apart (a test compares them).
    public static func referenceMarkdown() -> String {
        var text = """
            # Configuration reference

            `verify-worker run` reads each key from, in increasing precedence: a file of `VERIFY_…=value` lines named by
            `VERIFY_CONFIG_FILE` or `--config-file`, the environment, and flags. Secrets have no flag: they come from
            `VERIFY_<KEY>` or, better, a file named by `VERIFY_<KEY>_FILE`. A bad value stops the worker at start with
            one line naming the key. This file is generated from the code (`verify-worker run --help` shows the same).

            | key | environment / file | flag | default | meaning |
            | --- | --- | --- | --- | --- |

            """
        for key in keys {
            let environment =
                key.isSecret ? "`\(key.environmentName)`, `\(key.environmentName)_FILE`" : "`\(key.environmentName)`"
            let flag = key.flagName.map { "`\($0)`" } ?? "none (secret)"
            let defaultValue =
                key.isRequired ? "required" : key.defaultValue.map { $0.isEmpty ? "empty" : "`\($0)`" } ?? "none"
            text += "| `\(key.name)` | \(environment) | \(flag) | \(defaultValue) | \(key.summary) |\n"
        }
        return text
    }
}

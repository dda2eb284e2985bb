import Foundation

/// The `VERIFY_…` environment variables a long-running command refuses: a misspelt setting would otherwise start
/// the command on the default of the setting meant, with no word.
///
/// One environment often serves several commands of a deployment (a ConfigMap for the worker, the gateway and the
/// entitlement service), so a key of any command is accepted, as are the variables the project documents for other
/// purposes (``otherVariables``) and those an operator lists in `VERIFY_IGNORE_VARIABLES` (names another tool sets).
public enum EnvironmentVariables {
    /// The prefix of every setting's variable.
    public static let prefix = "VERIFY_"

    /// `VERIFY_…` variables that are no key of a command's table but are documented for other purposes: the
    /// configuration file's name, the parent watch of child processes, the simulator's shared secret, and the test
    /// and harness variables (README.md, scripts/test.sh, scripts/test-postgres.sh).
    public static let otherVariables: [String] = [
        "VERIFY_CONFIG_FILE", "VERIFY_EXIT_WITH_PARENT", "VERIFY_SIM_SHARED_SECRET", "VERIFY_FIXTURES_DIR",
        "VERIFY_WORKER_BINARY", "VERIFY_UPDATE_SCREENSHOT", "VERIFY_TEST_POSTGRES_URL", "VERIFY_TEST_PG_CTL",
        "VERIFY_TEST_PG_DATA", "VERIFY_TEST_TIMEOUT_S", "VERIFY_TEST_WIDTH", "VERIFY_PG_SCRIPT", "VERIFY_PG_STATE",
        "VERIFY_PG_TLS",
    ]

    /// The key of every command's table that lists variables not to refuse.
    public static let ignoreKey = ConfigurationKey(
        "ignore_variables", default: "",
        "VERIFY_… environment variables, comma-separated, that another tool sets and this command must not refuse "
            + "(any other VERIFY_… variable that is no key of a verify-worker command stops it at start).")

    /// The variables a table reads: each key's, and `_FILE` for a secret.
    public static func names(of table: ConfigurationTable) -> [String] {
        table.keys.flatMap { key in
            (key.isSecret ? [key.environmentName, key.environmentName + "_FILE"] : [key.environmentName])
                + key.aliasEnvironmentNames
        }
    }

    /// Throws for the first `VERIFY_…` variable of `environment` (in name order) that `table` does not read, no
    /// table of `otherTables` reads, the project does not document and `ignored` does not list: one line naming it
    /// and, when one is close, the known name it probably meant.
    public static func refuseUnknown(
        _ environment: [String: String], table: ConfigurationTable, otherTables: [ConfigurationTable],
        ignored: [String]
    ) throws(ConfigurationError) {
        // The command's own names first: a tie in ``nearest(to:among:)`` goes to them.
        let candidates = names(of: table) + otherTables.flatMap(names(of:)) + otherVariables
        let known = Set(candidates + ignored + [ignoreKey.environmentName])
        for name in environment.keys.sorted() where name.hasPrefix(prefix) && !known.contains(name) {
            let suggestion = nearest(to: name, among: candidates)
            throw ConfigurationError(
                key: name,
                problem: "not a setting of \(table.command)" + (suggestion.map { " (did you mean \($0)?)" } ?? ""))
        }
    }

    /// The candidate closest to `name` by edit distance, when it is close enough to be a misspelling of it
    /// (at most a third of its letters, and at least 2, changed); ties go to the command's own keys (listed first).
    static func nearest(to name: String, among candidates: [String]) -> String? {
        let word = Array(name.dropFirst(prefix.count))
        var best: (name: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(word, Array(candidate.dropFirst(prefix.count)))
            if distance < (best?.distance ?? .max) { best = (candidate, distance) }
        }
        guard let best, best.distance <= max(2, word.count / 3) else { return nil }
        return best.name
    }

    /// Levenshtein distance: insertions, deletions and substitutions of one character each count 1.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for (i, left) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, right) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (left == right ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

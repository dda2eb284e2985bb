extension MockKafkaCluster {
    /// The text control language of `verify-worker dev-broker` (one command per stdin line), so that
    /// chaos tests in another process can break and heal the cluster. Every command gets one reply
    /// line starting with `ok` or `error`.
    ///
    /// - `down <broker-id>` / `up <broker-id>`: broker down or up (`-1` for all)
    /// - `errors <api-key> <count> <error-code>`: the next `count` requests of that Kafka `ApiKey`
    ///   (0 produce, 1 fetch, 8 offset commit, …) fail with `error-code` (a numeric
    ///   `rd_kafka_resp_err_t`, e.g. 6 NOT_LEADER_FOR_PARTITION, -195 disconnect)
    /// - `clear-errors <api-key>`: forget pushed errors
    /// - `topic <name> <partitions>`: create a topic
    public static let controlHelp = """
        down <broker-id> | up <broker-id> | errors <api-key> <count> <error-code> | \
        clear-errors <api-key> | topic <name> <partitions>
        """

    /// Performs one control command and returns its reply line.
    public func perform(controlCommand line: String) -> String {
        let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard let verb = words.first else { return "error empty command; commands: \(Self.controlHelp)" }
        do {
            switch (verb, words.count) {
            case ("down", 2):
                guard let id = Int32(words[1]) else { break }
                try setBrokerDown(id)
                return "ok down \(id)"
            case ("up", 2):
                guard let id = Int32(words[1]) else { break }
                try setBrokerUp(id)
                return "ok up \(id)"
            case ("errors", 4):
                guard let apiKey = Int16(words[1]), let count = Int(words[2]), (1...10_000).contains(count),
                    let code = Int32(words[3])
                else { break }
                pushRequestErrors(
                    APIKey(rawValue: apiKey), Array(repeating: KafkaError.Code(rawValue: code), count: count))
                return "ok errors \(apiKey) \(count) \(code)"
            case ("clear-errors", 2):
                guard let apiKey = Int16(words[1]) else { break }
                clearRequestErrors(APIKey(rawValue: apiKey))
                return "ok clear-errors \(apiKey)"
            case ("topic", 3):
                guard let partitions = Int(words[2]), (1...10_000).contains(partitions) else { break }
                try createTopic(words[1], partitions: partitions)
                return "ok topic \(words[1]) \(partitions)"
            default:
                break
            }
        } catch {
            return "error \(error)"
        }
        return "error cannot parse \"\(line.prefix(200))\"; commands: \(Self.controlHelp)"
    }
}

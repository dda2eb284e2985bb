/// Keys that several commands' tables share, written once so that their flags, variables, defaults and help stay
/// the same in each.
extension ConfigurationKey {
    /// `brokers`: where a command's Kafka clients connect.
    public static let brokers = ConfigurationKey(
        "brokers", default: "localhost:9092", "Kafka bootstrap servers, comma-separated host:port.")

    /// `kafka_properties`: librdkafka settings a deployment adds (TLS, SASL, tuning).
    public static let kafkaProperties = ConfigurationKey(
        "kafka_properties", default: "",
        "Extra librdkafka properties, `name=value` separated by `;` (e.g. security.protocol=SSL).")

    /// `log_level`: the lowest level a command logs.
    public static let logLevel = ConfigurationKey(
        "log_level", default: "info", "trace, debug, info, notice, warning, error or critical.")

    /// `log_format`: how a command writes its log lines.
    public static let logFormat = ConfigurationKey("log_format", default: "json", "json (one object per line) or text.")
}

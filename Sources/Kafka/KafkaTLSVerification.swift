import Foundation
import Logging

/// The librdkafka properties that switch off the check of the brokers' TLS certificates. They are accepted (a test
/// cluster with a self-signed certificate needs them), but every command that takes `kafka_properties` says so once at
/// start, through ``warnIfSwitchedOff(_:logger:)``.
public enum KafkaTLSVerification {
    /// `name=value` of each property in `properties` that switches a check off, sorted: a certificate verification
    /// turned off (`enable.ssl.certificate.verification` false) or the host name check (`ssl.endpoint.identification.
    /// algorithm` none).
    public static func switchedOff(in properties: [String: String]) -> [String] {
        var found: [String] = []
        for (name, value) in properties {
            let normalized = value.trimmingCharacters(in: .whitespaces).lowercased()
            switch name {
            case "enable.ssl.certificate.verification" where ["false", "f", "0", "no", "off"].contains(normalized):
                found.append("\(name)=\(value)")
            case "ssl.endpoint.identification.algorithm" where normalized == "none":
                found.append("\(name)=\(value)")
            default:
                break
            }
        }
        return found.sorted()
    }

    /// Logs one warning naming the properties of `properties` that switch a check of the brokers' certificates off;
    /// nothing when none does.
    public static func warnIfSwitchedOff(_ properties: [String: String], logger: Logger) {
        let found = switchedOff(in: properties)
        guard !found.isEmpty else { return }
        logger.warning(
            """
            kafka: TLS verification of the brokers is switched off by kafka_properties (\(found.joined(separator: ", "))): \
            anyone on the network path can pose as a broker; for development only
            """)
    }
}

import Foundation

/// The rules of `verify-worker healthcheck`: which URLs it may probe and what counts as healthy.
public enum HealthProbe {
    /// The outcome and the one line to print.
    public struct Assessment: Sendable, Hashable {
        public var isHealthy: Bool
        public var line: String
        public init(isHealthy: Bool, line: String) {
            self.isHealthy = isHealthy
            self.line = line
        }
    }

    /// Why `url` may not be probed (nil when it may): plain HTTP to this host only, as a container's health check
    /// probes its own process.
    public static func problem(with url: String) -> String? {
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "http" else {
            return "--url must be http://localhost…, http://127.0.0.1… or http://[::1]…"
        }
        let host = (components.host ?? "").lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        guard ["localhost", "127.0.0.1", "::1"].contains(host) else {
            return "--url must point at this host (localhost, 127.0.0.1 or [::1]), not \(host)"
        }
        return nil
    }

    /// Healthy on HTTP 200 only; the line carries the status and the start of the body (the probes answer short
    /// text such as `ready` or `not ready: no_assignment`).
    public static func assessment(url: String, status: Int, body: [UInt8]) -> Assessment {
        let text =
            String(decoding: body.prefix(200), as: UTF8.self)
            .split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        let healthy = status == 200
        return Assessment(
            isHealthy: healthy, line: "\(healthy ? "healthy" : "unhealthy"): \(url): HTTP \(status) \(text)")
    }
}

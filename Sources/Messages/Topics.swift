/// The topic names of the contract. Each is configurable in the worker; these are the defaults.
public enum Topics {
    /// Jobs from frontends (key = `account_id`).
    public static let jobs = "receipt-jobs"
    /// Verdicts for entitlement services (key = `account_id`).
    public static let verdicts = "receipt-verdicts"
    /// Messages that are not valid jobs, original bytes plus the reason in headers.
    public static let deadLetters = "receipt-jobs-dlq"
    /// Throttle signals between workers (compacted, key = worker id).
    public static let control = "receipt-control"
}

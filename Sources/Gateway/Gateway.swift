/// The edge service of issue 9: `POST /v1/receipts` and `POST /apple/notifications` published to `receipt-jobs`.
/// (Being built.)
public enum Gateway {}

/// A value kept behind a reference: a large field that is rarely set costs the structs carrying it one pointer.
/// ``PurchaseEvidence`` and ``LedgerSnapshot`` are held across awaits on every job's path, where each byte of them
/// is kept in every waiting job's async frames (the waiting chain's bound, `AsyncFrames` in the worker); a Google Play
/// notification's facts and a pending purchase are set on a few jobs only.
final class IndirectValue<Value: Sendable & Hashable>: Sendable, Hashable {
    let value: Value

    init(_ value: Value) { self.value = value }

    static func == (lhs: IndirectValue, rhs: IndirectValue) -> Bool { lhs.value == rhs.value }

    func hash(into hasher: inout Hasher) { value.hash(into: &hasher) }
}

import Synchronization

/// A flag set once and read by any thread: a stop request shared between an owner and its poll thread, or a
/// service's "stopping" that its readiness reports.
public final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    public init() {}
    public var isSet: Bool { value.load(ordering: .acquiring) }
    public func set() { value.store(true, ordering: .releasing) }
}

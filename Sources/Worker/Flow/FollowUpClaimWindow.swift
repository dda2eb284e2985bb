/// How long a follow-up call (Finish Transaction, a consumption answer, a Google Play acknowledge, consume or refund
/// review answer) may take on its holder's claim in the ledger.
///
/// A claim lasts its lease; once it has passed, another worker's sweep may take the record over and make the call
/// itself. A holder still calling or retrying a throttled call then would call beside it: a second acknowledge, a
/// second answer to one question. So a call ends `callDeadline` from now, but never later than the claim's end less
/// the time a request in flight may still take (a fifth of the lease, at most 5 s).
enum FollowUpClaimWindow {
    /// The deadline of a call claimed until `claimEnds` (nil: not claimed by this worker, the call's own deadline),
    /// or nil when no time is left: the call is left to the sweep that takes the record next.
    static func deadline(
        callDeadline: Duration, claimLease: Duration, claimEnds: ContinuousClock.Instant?,
        now: ContinuousClock.Instant = .now
    ) -> ContinuousClock.Instant? {
        var deadline = now.advanced(by: callDeadline)
        if let claimEnds {
            let margin = min(claimLease / 5, .seconds(5))
            deadline = min(deadline, claimEnds.advanced(by: .zero - margin))
        }
        return deadline > now ? deadline : nil
    }
}

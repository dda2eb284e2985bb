/// The multi-process chaos harness and its adversarial input.
///
/// - ``ChaosRun``: starts the dev broker, the Apple simulator, PostgreSQL and N `verify-worker run` processes,
///   submits the seed-000 mix with adversarial cases, injects a fault schedule and checks the invariants.
/// - ``ChaosInvariantChecker``: the invariants as one pure function of what was submitted and what came out.
/// - ``AdversarialJobCorpus``: hostile `receipt-jobs` messages for the in-process fuzz test and `chaos --fuzz N`.
///
/// docs/RELIABILITY.md says what is promised and how each promise is tested.
public enum Chaos {}

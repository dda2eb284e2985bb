/// The rule that keeps the async frames of waiting jobs small, written once.
///
/// A task's async frames live in its own allocator, whose slabs are kept until the task ends. Jobs that wait for the
/// ledger or the store are parked as data (``JobFlow`` values in the worker's stages), but some jobs still wait as
/// tasks: the runners of the store stage (256 or more), the followers of a single flight, and the jobs held while the
/// store refuses this worker's own configuration (thousands in a replay storm). Hence:
///
/// 1. An async function such a task may be suspended in keeps little across its awaits. Synchronous work next to an
///    await (reading a proof, mapping an answer, metrics, logs) is a synchronous function marked `@inline(never)`:
///    its locals live on the thread's stack while it runs, and never become slots in the async frame of a function
///    that would otherwise inline it (an optimized build inlines freely).
/// 2. Each async function of the waiting chain keeps at most ``maximumFrameBytes`` of frame in a debug build, and the
///    chain at most ``maximumChainBytes``. `AsyncFrameTests` reads the sizes from the test binary's async function
///    pointers, so a frame that grows past the rule fails a test.
enum AsyncFrames {
    /// The most one async function of the waiting chain may keep across its awaits (debug build).
    static let maximumFrameBytes = 4_096
    /// The most the whole waiting chain may keep, from the stage's runner to the call gate (debug build).
    static let maximumChainBytes = 20_480
}

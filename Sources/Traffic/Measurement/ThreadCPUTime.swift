import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// CPU time used by the calling thread: what a fuzz loop's "slowest input" bound measures, so that waiting for a
/// core on a busy machine does not count as work.
public enum ThreadCPUTime {
    /// Seconds of CPU the calling thread has used so far.
    public static func seconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
    }
}

#if canImport(Glibc)
    import Glibc
#endif

/// glibc's malloc arenas for a long-running worker.
///
/// glibc gives each thread that contends for the heap an arena of its own, up to eight per core. A worker's
/// allocations come from many threads (the concurrency pool, librdkafka's broker threads, the curl thread), so
/// freed job memory ends up scattered over many arenas that are rarely given back, and resident memory grows
/// well past what is live. Two arenas keep it close to the live set at no measurable cost in throughput here
/// (docs/BENCHMARKS.md, Pipeline (e)).
public enum MallocArenas {
    /// The limit the worker applies unless the environment already sets `MALLOC_ARENA_MAX` (which glibc reads
    /// itself, so an operator's value always wins).
    public static let defaultLimit: Int32 = 2

    /// Limits the arenas to `limit` when `MALLOC_ARENA_MAX` is absent from `environment`. Returns the limit it
    /// applied, or nil when it left glibc alone (the variable was set, or this is not glibc).
    @discardableResult
    public static func limit(to limit: Int32 = defaultLimit, environment: [String: String]) -> Int32? {
        guard environment["MALLOC_ARENA_MAX"] == nil, limit > 0 else { return nil }
        #if canImport(Glibc)
            // `mallopt` lives in <malloc.h>, which the Glibc module does not export; look it up instead.
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return nil }
            typealias MallOpt = @convention(c) (Int32, Int32) -> Int32
            let mallopt = unsafeBitCast(symbol, to: MallOpt.self)
            return mallopt(arenaMaxParameter, limit) == 1 ? limit : nil
        #else
            return nil
        #endif
    }

    /// `M_ARENA_MAX` of glibc's <malloc.h>.
    private static let arenaMaxParameter: Int32 = -8
}

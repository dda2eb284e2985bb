import Operations
import Testing

@Suite("Operations: malloc arenas")
struct MallocArenasTests {
    @Test("the worker limits glibc's arenas unless the operator set MALLOC_ARENA_MAX")
    func limitUnlessSet() {
        #expect(MallocArenas.limit(environment: ["MALLOC_ARENA_MAX": "8"]) == nil)
        #expect(MallocArenas.limit(to: 0, environment: [:]) == nil)
        #if canImport(Glibc)
            #expect(MallocArenas.limit(environment: ["PATH": "/usr/bin"]) == MallocArenas.defaultLimit)
        #endif
    }
}

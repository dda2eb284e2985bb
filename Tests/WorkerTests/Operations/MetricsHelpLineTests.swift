import Testing

@testable import Operations

@Suite("Operations: the HELP line's escapes")
struct MetricsHelpLineTests {
    @Test("a backslash and a line break in help text are escaped, nothing else is")
    func escapes() {
        let line = String(
            decoding: MetricsExposition.helpLine(name: "m_total", help: #"a\b"# + "\nc \"d\""), as: UTF8.self)
        #expect(line == #"# HELP m_total a\\b\nc "d""# + "\n")
    }
}

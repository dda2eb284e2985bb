extension Duration {
    /// This duration in seconds as a `Double`: what the benchmarks' rates and reports use.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }
}

import CRdKafka

/// What differs between librdkafka versions, decided by the version linked at run time (`rd_kafka_version()`), not
/// the headers compiled against: a distribution may upgrade the shared library under the binary.
enum RDKafkaVersion {
    /// The linked library's version, `0xMMmmrrpp` (major, minor, revision, pre-release; `0xff` for a release).
    static let linked = Int(rd_kafka_version())

    /// The first version whose `rd_kafka_seek_partitions` reads its timeout in milliseconds (2.1.0).
    static let seekTimeoutInMilliseconds = 0x0201_0000

    /// The `timeout_ms` argument that makes `rd_kafka_seek_partitions` of librdkafka `version` wait `milliseconds`.
    ///
    /// Before 2.1.0 the function handed its remaining time, in milliseconds, to a queue wait that counts
    /// microseconds, so a 5,000 ms timeout waited 5 ms (fixed upstream by confluentinc/librdkafka#4230; in the 2.0.2
    /// binary the value passed to the wait is the remaining time divided by 1,000). Passing milliseconds × 1,000
    /// there waits the time asked for. 0 (do not wait) and negative values (wait without end) mean the same in both
    /// units and are passed as they are.
    static func seekTimeoutArgument(milliseconds: Int, version: Int = linked) -> Int32 {
        guard milliseconds > 0, version < seekTimeoutInMilliseconds else { return Int32(clamping: milliseconds) }
        let (microseconds, overflow) = milliseconds.multipliedReportingOverflow(by: 1_000)
        return Int32(clamping: overflow ? Int.max : microseconds)
    }
}

import Foundation
import Logging
import Observability
import Operations
import Synchronization
import Testing

@Suite("Structured logs")
struct JSONLogHandlerTests {
    @Test("each line is one JSON object with the metadata flattened and text escaped")
    func jsonLines() throws {
        let captured = Mutex<[[UInt8]]>([])
        var logger = Logger(label: "test") { label in
            JSONLogHandler(label: label, level: .debug) { line in captured.withLock { $0.append(line) } }
        }
        logger[metadataKey: LogKeys.workerID] = "w-1"
        logger.info(
            "decided \"quoted\"\nnext line\u{1}",
            metadata: [LogKeys.jobID: "j-1", LogKeys.partition: "3", "nested": ["a": ["1", "2"]]])
        logger.trace("below the level")

        let lines = captured.withLock { $0 }
        #expect(lines.count == 1)
        let line = try #require(lines.first)
        #expect(line.last == 0x0A)
        #expect(line.dropLast().contains(0x0A) == false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        #expect(object["msg"] as? String == "decided \"quoted\"\nnext line\u{1}")
        #expect(object["level"] as? String == "info")
        #expect(object["label"] as? String == "test")
        #expect(object[LogKeys.jobID] as? String == "j-1")
        #expect(object[LogKeys.workerID] as? String == "w-1")
        #expect((object["nested"] as? [String: [String]])?["a"] == ["1", "2"])
        let timestamp = try #require(object["ts"] as? String)
        #expect(timestamp.count == 24 && timestamp.hasSuffix("Z"))
    }
}

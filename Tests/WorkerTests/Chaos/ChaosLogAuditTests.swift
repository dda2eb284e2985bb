import Chaos
import Foundation
import Observability
import Testing

@Suite("Chaos: log audit")
struct ChaosLogAuditTests {
    @Test("Secrets and receipt-length base64 runs are found, ids and hashes are not")
    func audit() {
        let receipt = Data(repeating: 0x5A, count: 300).base64EncodedString()
        let text = """
            {"level":"info","message":"job decided",LogKeys.jobID:"c0ffee-1","sha256":"\(String(repeating: "ab", count: 32))"}
            {"level":"trace","message":"request","password":"s3cret-value"}
            {"level":"debug","message":"body","receipt-data":"\(receipt)"}
            {"level":"info","verdict_id":"\(UUID().uuidString)"}
            """
        let findings = ChaosLogAudit.audit(text, log: "worker-0.log", secrets: ["s3cret-value"])
        #expect(findings.map(\.line) == [2, 3])
        #expect(findings.map(\.what) == ["a secret", "a receipt-length base64 run"])
        #expect(!findings.map(\.description).joined().contains("s3cret-value"))
    }

    @Test("A JWS is a receipt too")
    func jws() {
        let segment = String(repeating: "eyJhbGciOiJFUzI1NiJ9", count: 12)
        let findings = ChaosLogAudit.audit("token \(segment).\(segment).sig", log: "x.log", secrets: [])
        #expect(findings.count == 1)
    }
}

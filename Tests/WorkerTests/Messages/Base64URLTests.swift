import Foundation
import Testing

@testable import Messages

/// The one base64url codec and compact-JWS peek (notification jobs, the App Store Connect token, the simulator's
/// signed objects, the harness's forged ones).
@Suite("Messages: base64url and the unverified JWS peek")
struct Base64URLTests {
    @Test("every length round-trips; no padding and only the URL alphabet on the way out")
    func roundTrip() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<64 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == Data(bytes))
            #expect(Base64URL.decode(Substring(text)) == Data(bytes))
        }
        #expect(Base64URL.decode("a") == nil, "an impossible length")
        #expect(Base64URL.decode("ab.c") == nil)
    }

    @Test("the payload of a compact JWS, unverified")
    func peek() {
        let jws =
            Base64URL.encode(Data(#"{"alg":"ES256"}"#.utf8)) + "." + Base64URL.encode(Data(#"{"a":"b"}"#.utf8))
            + ".sig"
        #expect(CompactJWS.payloadObject(of: jws)?["a"] as? String == "b")
        #expect(CompactJWS.payloadObject(of: "a.b") == nil)
        #expect(CompactJWS.payloadObject(of: "a.!!.c") == nil)
    }
}

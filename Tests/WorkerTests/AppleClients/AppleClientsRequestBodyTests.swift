import Foundation
import Testing

@testable import AppleClients

@Suite("Apple clients: verifyReceipt request body")
struct AppleClientsRequestBodyTests {
    @Test(
        "Strings are written as JSON that decodes to the same text",
        arguments: [
            "TUlJ+/base64==", "quote \" backslash \\ slash /", "line\nreturn\rtab\tbell\u{07}nul\u{0}", "é ✓ 𝄞",
        ])
    func roundTrip(text: String) throws {
        var bytes: [UInt8] = []
        VerifyReceiptClient.appendJSONString(text, to: &bytes)
        let decoded = try JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed) as? String
        #expect(decoded == text)
    }
}

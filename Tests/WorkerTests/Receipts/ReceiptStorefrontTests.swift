import Decision
import Foundation
import Messages
import Receipts
import Testing

@testable import AppleClients

/// The App Store's `storefront` read into the facts from a signed transaction and from the Server API's answer.
@Suite("Receipts: the storefront of a signed transaction")
struct ReceiptStorefrontTests {
    /// The storefront read from a signed transaction whose `storefront` member is `storefront` (JSON text).
    static func storefront(_ storefront: String, pki: ReceiptsTestPKI) throws -> String? {
        let payload = ReceiptForgeryTests.transactionPayload().replacingOccurrences(
            of: #""revocationReason":1}"#, with: #""revocationReason":1,"storefront":\#(storefront)}"#)
        let analysis = JudgingAnalyzer(trust: pki.trust, catalog: ReceiptForgeryTests.catalog).analyze(
            Array(try pki.jws(payload: payload).utf8))
        #expect(analysis.signature == .valid)
        #expect(analysis.analysis.facts.transactions.count == 1, "the transaction is read whatever its storefront")
        return analysis.analysis.facts.transactions.first?.storefront
    }

    @Test("a JWS's storefront is its country; one lower case, too long or not text is no country, and harms nothing")
    func signedTransaction() throws {
        let pki = try ReceiptsTestPKI.make()
        #expect(try Self.storefront(#""DEU""#, pki: pki) == "DEU")
        for malformed in [#""deu""#, #""DEUT""#, "143443", #"{"id":"DEU"}"#, "null"] {
            #expect(try Self.storefront(malformed, pki: pki) == nil, "\(malformed)")
        }
    }

    @Test("the Server API's transaction states its storefront (Apple's fixture: USA)")
    func serverAPI() throws {
        let json = LenientJSON.parse(
            Array(try TestEnvironment.fixture("apple-swift/models/signedTransaction.json")))
        var decoded = try SignedTransaction(payload: try #require(json))
        #expect(decoded.purchase.storefront == "USA")
        decoded.storefront = "usa"
        #expect(decoded.purchase.storefront == nil)
    }
}

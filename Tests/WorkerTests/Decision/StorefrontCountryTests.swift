import Foundation
import Testing

@testable import Decision

/// ``StorefrontCountry``: the App Store's alpha-3 storefront kept when well formed, Google Play's alpha-2 region
/// converted by ISO's table (generated from iso-codes), and nothing invented for a code that is neither.
@Suite("Decision: the storefront country")
struct StorefrontCountryTests {
    @Test("the alpha-2 table: edge entries convert, and every alpha-3 code maps back to exactly one alpha-2 code")
    func table() {
        let edges = [
            "AD": "AND", "ZW": "ZWE", "DE": "DEU", "US": "USA", "GB": "GBR", "NA": "NAM", "AQ": "ATA", "SS": "SSD",
            "CW": "CUW", "TW": "TWN", "AX": "ALA",
        ]
        for (alpha2, alpha3) in edges {
            #expect(StorefrontCountry.alpha3(googlePlayRegionCode: alpha2) == alpha3, "\(alpha2)")
        }
        let table = StorefrontCountry.alpha3ByAlpha2
        #expect(table.count == 249)
        let back = Dictionary(table.map { ($0.value, [$0.key]) }, uniquingKeysWith: +)
        #expect(back.count == table.count, "one alpha-3 code for two countries")
        for (alpha3, alpha2s) in back.sorted(by: { $0.key < $1.key }) {
            #expect(alpha2s.count == 1 && table[alpha2s[0]] == alpha3, "\(alpha3)")
            #expect(StorefrontCountry.alpha3(appStoreStorefront: alpha3) == alpha3)
        }
    }

    @Test(
        "Google Play: a region ISO does not assign, or not two capitals, is no country",
        arguments: [
            "XK", "UK", "ZZ", "EU", "us", "De", "USA", "U", "", " US", "US ", "Ü1", "🇩🇪",
        ])
    func unknownRegion(code: String) {
        #expect(StorefrontCountry.alpha3(googlePlayRegionCode: code) == nil)
    }

    @Test("App Store: three capital letters as Apple wrote them; anything else is no country")
    func appStoreStorefront() {
        #expect(StorefrontCountry.alpha3(appStoreStorefront: "DEU") == "DEU")
        #expect(StorefrontCountry.alpha3(appStoreStorefront: "XKS") == "XKS", "Apple's own code for Kosovo")
        for malformed in ["usa", "US", "USAA", "", "U1A", "ÜSA", "🇺🇸"] {
            #expect(StorefrontCountry.alpha3(appStoreStorefront: malformed) == nil, "\(malformed)")
        }
        #expect(StorefrontCountry.alpha3(appStoreStorefront: nil) == nil)
        #expect(StorefrontCountry.alpha3(googlePlayRegionCode: nil) == nil)
    }
}

/// The country of a purchase's storefront, as the ledger records it and the refund policy's `storefront_countries`
/// compares it: an ISO 3166-1 alpha-3 code in capitals (`USA`, `DEU`). A code that is malformed, or that ISO does not
/// assign, is not known (nil): never a guess.
public enum StorefrontCountry {
    /// The App Store's `storefront` (alpha-3 already, `USA`): kept as Apple wrote it when it is three capital letters.
    /// Apple's own storefront codes are taken as they are, so one ISO does not assign (Kosovo's `XKS`) still matches
    /// a rule that names it.
    public static func alpha3(appStoreStorefront storefront: String?) -> String? {
        guard let storefront, storefront.utf8.count == 3, storefront.utf8.allSatisfy(Self.isCapitalLetter) else {
            return nil
        }
        return storefront
    }

    /// Google Play's `regionCode` (alpha-2, `US`) as its alpha-3 code, from ISO's table (``alpha3ByAlpha2``); nil
    /// for a code ISO does not assign or one that is not two capital letters.
    public static func alpha3(googlePlayRegionCode regionCode: String?) -> String? {
        guard let regionCode, regionCode.utf8.count == 2, regionCode.utf8.allSatisfy(Self.isCapitalLetter) else {
            return nil
        }
        return alpha3ByAlpha2[regionCode]
    }

    private static func isCapitalLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }
}

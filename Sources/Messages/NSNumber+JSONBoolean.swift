import Foundation

extension NSNumber {
    /// Whether this value came from JSON's `true` or `false`. JSONSerialization gives booleans and numbers alike as
    /// NSNumber, and `as? Bool` holds for the numbers 0 and 1 too; a boolean's Objective-C type is `c` (char), and no
    /// JSON number's is.
    public var isJSONBoolean: Bool { String(cString: objCType) == "c" }
}

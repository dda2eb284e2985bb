import Foundation
import SwiftASN1
import X509

/// The certificates a chain may end at. Configuration, not code: production uses `.apple`; tests and the
/// Apple simulator add their own roots with `adding(anchors:)`.
public struct TrustStore: Sendable {
    /// The anchors, parsed once.
    public private(set) var anchors: [Certificate]

    public init(anchors: [Certificate] = []) { self.anchors = anchors }

    /// Parses DER certificates; throws on the first that is not one.
    public init(derEncodedAnchors: [[UInt8]]) throws {
        self.anchors = try derEncodedAnchors.map { try Certificate(derEncoded: $0) }
    }

    /// Apple Inc. Root CA (PKCS#7 receipts) and Apple Root CA - G3 (JWS), shipped as resources.
    public static let apple: TrustStore = {
        var anchors: [Certificate] = []
        for name in ["AppleIncRootCA", "AppleRootCA-G3"] {
            guard
                let url = Bundle.module.url(forResource: name, withExtension: "cer", subdirectory: "TrustAnchors")
                    ?? Bundle.module.url(forResource: name, withExtension: "cer"),
                let data = try? Data(contentsOf: url), let certificate = try? Certificate(derEncoded: Array(data))
            else { continue }
            anchors.append(certificate)
        }
        return TrustStore(anchors: anchors)
    }()

    /// This store plus more anchors (a test CA, the simulator's CA, Xcode's StoreKit certificate).
    public func adding(anchors more: [Certificate]) -> TrustStore {
        TrustStore(anchors: anchors + more)
    }

    /// Apple's roots plus the certificates of each of `anchorFiles` (a PEM file may hold several).
    /// - Throws: the path of the first file that holds no certificate that can be read.
    public static func apple(addingAnchorsFrom anchorFiles: [String]) throws(UnreadableAnchorFile) -> TrustStore {
        var trust = TrustStore.apple
        for path in anchorFiles {
            guard let certificates = try? loadCertificates(contentsOf: URL(fileURLWithPath: path)) else {
                throw UnreadableAnchorFile(path: path)
            }
            trust = trust.adding(anchors: certificates)
        }
        return trust
    }

    /// Reads a certificate file: DER (one certificate) or PEM with one or more `CERTIFICATE` blocks, as a CA
    /// bundle holds them (every TLS tool accepts bundles; other PEM blocks are skipped).
    /// - Throws: when a block does not parse, or the file holds no certificate.
    public static func loadCertificates(contentsOf url: URL) throws -> [Certificate] {
        let data = try Data(contentsOf: url)
        if let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN ") {
            let certificates = try PEMDocument.parseMultiple(pemString: text)
                .filter { $0.discriminator == "CERTIFICATE" }
                .map { try Certificate(derEncoded: $0.derBytes) }
            guard !certificates.isEmpty else { throw NoCertificate() }
            return certificates
        }
        return [try Certificate(derEncoded: Array(data))]
    }

    /// A file that holds no certificate.
    public struct NoCertificate: Error, CustomStringConvertible {
        public var description: String { "no certificate in the file" }
    }
}

/// A trust-anchor file that holds no certificate that can be read.
public struct UnreadableAnchorFile: Error, Sendable {
    public var path: String
}

import Foundation
import SwiftASN1
import Synchronization
import X509
import _CryptoExtras

/// Validates signer chains against a `TrustStore` and caches the outcome per distinct chain, so a stream of
/// receipts or JWS signed by the same leaf costs one signature verification each.
///
/// The cached outcome does not depend on time: it keeps the intersection of the chain's validity windows, and
/// each use checks its own validation time (a receipt's creation date or a JWS `signedDate`) against it.
public final class ChainVerifier: Sendable {
    /// Extensions Apple puts on its receipt and JWS signing chains.
    static let leafMarkerOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 11, 1]
    static let intermediateMarkerOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 1]
    /// Longest path accepted: leaf, up to three intermediates, anchor.
    static let maximumPathLength = 5
    /// Entries kept before the cache starts over; real traffic has a handful of distinct chains.
    static let cacheCapacity = 1024

    /// A chain that reached an anchor, with what later checks need.
    struct VerifiedChain: Sendable {
        var leaf: Certificate
        /// The latest `notBefore` and earliest `notAfter` over the whole path, anchor included.
        var notBefore: Date
        var notAfter: Date
        /// An Xcode chain accepted without an anchor (only when the policy allows Xcode receipts).
        var unanchored = false
    }

    /// The time-independent outcome of building and checking a path.
    enum Outcome: Sendable {
        case trusted(VerifiedChain)
        case invalid(String)
        case untrusted(String)

        /// The status at a validation time.
        func status(at time: Date) -> SignatureStatus {
            switch self {
            case .trusted(let chain):
                if time < chain.notBefore {
                    return .invalid(reason: "certificate chain not yet valid at \(RFC3339.format(time))")
                }
                if time > chain.notAfter {
                    return .invalid(reason: "certificate chain expired at \(RFC3339.format(time))")
                }
                return .valid
            case .invalid(let reason): return .invalid(reason: reason)
            case .untrusted(let reason): return .untrusted(reason: reason)
            }
        }
    }

    let trust: TrustStore
    let requireAppleMarkerOIDs: Bool
    private let cache = Mutex<[[UInt8]: Outcome]>([:])
    /// iOS 6 signing keys by certificate bytes (they are 1024-bit, so they bypass `Certificate`).
    let legacyKeys = Mutex<[[UInt8]: _RSA.Signing.PublicKey]>([:])

    public init(trust: TrustStore, requireAppleMarkerOIDs: Bool = true) {
        self.trust = trust
        self.requireAppleMarkerOIDs = requireAppleMarkerOIDs
    }

    /// The cached outcome for a chain identified by `key` (its encoded certificates), computing it on a miss.
    func outcome(forKey key: [UInt8], build: () -> Outcome) -> Outcome {
        if let cached = cache.withLock({ $0[key] }) { return cached }
        let outcome = build()
        cache.withLock { entries in
            if entries.count >= Self.cacheCapacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = outcome
        }
        return outcome
    }

    /// Number of cached chains (for tests and the benchmark).
    public var cachedChainCount: Int { cache.withLock { $0.count } }

    /// Forgets every cached chain (the benchmark's cold case).
    public func removeAllCachedChains() { cache.withLock { $0.removeAll() } }

    /// Builds a path from `leaf` through `intermediates` to an anchor and checks signatures, CA flags and,
    /// when asked, Apple's marker extensions. Validity dates are folded into the result, not checked here.
    func buildPath(leaf: Certificate, intermediates: [Certificate]) -> Outcome {
        var path: [Certificate] = [leaf]
        var current = leaf
        var anchorReached = trust.anchors.contains(leaf)
        while !anchorReached {
            guard path.count < Self.maximumPathLength else { return .untrusted("certificate path too long") }
            if let anchor = trust.anchors.first(where: { $0.subject == current.issuer }) {
                guard anchor.publicKey.isValidSignature(current.signature, for: current) else {
                    return .invalid("certificate \"\(commonName(current))\" is not signed by its issuer")
                }
                path.append(anchor)
                anchorReached = true
                break
            }
            guard
                let issuer = intermediates.first(where: {
                    $0.subject == current.issuer && $0 != current && !path.contains($0)
                })
            else {
                return .untrusted("issuer \"\(commonName(issuer: current))\" is not a configured trust anchor")
            }
            guard issuer.publicKey.isValidSignature(current.signature, for: current) else {
                return .invalid("certificate \"\(commonName(current))\" is not signed by its issuer")
            }
            if let constraints = try? issuer.extensions.basicConstraints,
                case .notCertificateAuthority = constraints
            {
                return .invalid("issuer \"\(commonName(issuer))\" is not a certificate authority")
            }
            path.append(issuer)
            current = issuer
        }
        if requireAppleMarkerOIDs && path.count >= 3 {
            guard path[0].extensions[oid: Self.leafMarkerOID] != nil else {
                return .invalid("signing certificate lacks Apple's marker extension 1.2.840.113635.100.6.11.1")
            }
            guard path[1].extensions[oid: Self.intermediateMarkerOID] != nil else {
                return .invalid("intermediate certificate lacks Apple's marker extension 1.2.840.113635.100.6.2.1")
            }
        }
        let notBefore = path.map(\.notValidBefore).max() ?? leaf.notValidBefore
        let notAfter = path.map(\.notValidAfter).min() ?? leaf.notValidAfter
        return .trusted(VerifiedChain(leaf: leaf, notBefore: notBefore, notAfter: notAfter))
    }

    private func commonName(_ certificate: Certificate) -> String {
        commonName(of: certificate.subject)
    }

    private func commonName(issuer certificate: Certificate) -> String {
        commonName(of: certificate.issuer)
    }

    private func commonName(of name: DistinguishedName) -> String {
        for rdn in name {
            for attribute in rdn where attribute.type == .RDNAttributeType.commonName {
                return String(describing: attribute.value)
            }
        }
        return String(describing: name)
    }
}

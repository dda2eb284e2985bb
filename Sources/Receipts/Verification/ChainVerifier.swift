import Crypto
import Foundation
import Messages
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
        /// The leaf's key as an ES256 verifier, converted once per chain instead of once per JWS.
        var p256Key: P256.Signing.PublicKey?

        init(leaf: Certificate, notBefore: Date, notAfter: Date, unanchored: Bool = false) {
            self.leaf = leaf
            self.notBefore = notBefore
            self.notAfter = notAfter
            self.unanchored = unanchored
            self.p256Key = P256.Signing.PublicKey(leaf.publicKey)
        }
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
                let at = RFC3339.format(time, precision: .millisecondsWhenPresent)
                if time < chain.notBefore { return .invalid(reason: "certificate chain not yet valid at \(at)") }
                if time > chain.notAfter { return .invalid(reason: "certificate chain expired at \(at)") }
                return .valid
            case .invalid(let reason): return .invalid(reason: reason)
            case .untrusted(let reason): return .untrusted(reason: reason)
            }
        }
    }

    /// A certificate offered by a receipt (CMS `certificates`, JWS `x5c`): its encoding and its parsed form.
    struct OfferedCertificate {
        var der: [UInt8]
        var certificate: Certificate
    }

    /// A non-leaf certificate of a chain that reached an anchor, remembered by its encoding so that a new leaf
    /// under a known intermediate costs one parse and one signature check instead of a whole path.
    struct KnownCertificate: Sendable {
        var certificate: Certificate
        /// Set when the certificate was an intermediate of a verified path: what its part of that path proved.
        var issuerPath: IssuerPath?
    }

    /// The part of a verified path from an intermediate up to its anchor.
    struct IssuerPath: Sendable {
        /// The latest `notBefore` and earliest `notAfter` from the intermediate through the anchor.
        var notBefore: Date
        var notAfter: Date
        /// Certificates from the intermediate through the anchor.
        var length: Int
        var hasIntermediateMarker: Bool
    }

    let trust: TrustStore
    let requireAppleMarkerOIDs: Bool
    /// Outcomes by chain: the whole chain (and, for CMS, the signer) as the receipt carries it.
    private let cache = Mutex<[ByteKey: Outcome]>([:])
    /// Non-leaf certificates of trusted chains by their encoding. Apple has few, long-lived intermediates, so
    /// this survives the chain cache: a leaf never seen before under a known intermediate costs one parse and one
    /// signature check. Entries exist only for this verifier's anchors and marker policy.
    private let knownCertificates = Mutex<[ByteKey: KnownCertificate]>([:])
    /// iOS 6 signing keys by certificate bytes (they are 1024-bit, so they bypass `Certificate`).
    let legacyKeys = Mutex<[ByteKey: _RSA.Signing.PublicKey]>([:])

    public init(trust: TrustStore, requireAppleMarkerOIDs: Bool = true) {
        self.trust = trust
        self.requireAppleMarkerOIDs = requireAppleMarkerOIDs
    }

    /// The cached outcome for a chain identified by `key` (its encoded certificates), computing it on a miss.
    func outcome(forKey bytes: [UInt8], build: () -> Outcome) -> Outcome {
        let key = ByteKey(bytes)
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

    /// Number of intermediates whose path to an anchor is cached (for tests and the benchmark).
    public var cachedIntermediateCount: Int { knownCertificates.withLock { $0.values.count { $0.issuerPath != nil } } }

    /// Forgets every cached chain and intermediate (the benchmark's fully cold case).
    public func removeAllCachedChains() {
        cache.withLock { $0.removeAll() }
        knownCertificates.withLock { $0.removeAll() }
    }

    /// Forgets every cached chain but keeps the verified intermediates: the next receipt's leaf is checked as if
    /// never seen (the benchmark's cold-leaf case, and what a new Apple signing certificate costs in production).
    public func removeCachedLeafChains() { cache.withLock { $0.removeAll() } }

    /// Parses an offered certificate, or takes it from the known certificates when an earlier trusted chain
    /// carried the same bytes.
    func offeredCertificate(_ der: [UInt8]) -> OfferedCertificate? {
        if let known = knownCertificates.withLock({ $0[ByteKey(der)] }) {
            return OfferedCertificate(der: der, certificate: known.certificate)
        }
        guard let certificate = try? Certificate(derEncoded: der) else { return nil }
        return OfferedCertificate(der: der, certificate: certificate)
    }

    /// Builds a path from `leaf` through `intermediates` to an anchor and checks signatures, CA flags and,
    /// when asked, Apple's marker extensions. Validity dates are folded into the result, not checked here.
    func buildPath(leaf: OfferedCertificate, intermediates: [OfferedCertificate]) -> Outcome {
        if let outcome = pathThroughKnownIssuer(leaf: leaf, intermediates: intermediates) { return outcome }
        let (outcome, path) = buildFullPath(leaf: leaf.certificate, intermediates: intermediates.map(\.certificate))
        if case .trusted = outcome { remember(path: path, offered: intermediates) }
        return outcome
    }

    /// The outcome when the leaf's issuer is an intermediate already verified up to an anchor; nil when the full
    /// path must be built (unknown issuer, or a leaf issued directly by an anchor or being one).
    private func pathThroughKnownIssuer(leaf: OfferedCertificate, intermediates: [OfferedCertificate]) -> Outcome? {
        let current = leaf.certificate
        // The same choice as the full path: an anchor first, then the first matching intermediate.
        guard !trust.anchors.contains(where: { $0.subject == current.issuer }),
            let issuer = intermediates.first(where: {
                $0.certificate.subject == current.issuer && $0.certificate != current
            }),
            issuer.der != leaf.der,
            let known = knownCertificates.withLock({ $0[ByteKey(issuer.der)] }), let issuerPath = known.issuerPath,
            !trust.anchors.contains(current)
        else { return nil }
        guard 1 + issuerPath.length <= Self.maximumPathLength else { return nil }
        guard known.certificate.publicKey.isValidSignature(current.signature, for: current) else {
            return .invalid("certificate \"\(commonName(current))\" is not signed by its issuer")
        }
        if requireAppleMarkerOIDs && 1 + issuerPath.length >= 3 {
            guard current.extensions[oid: Self.leafMarkerOID] != nil else {
                return .invalid("signing certificate lacks Apple's marker extension 1.2.840.113635.100.6.11.1")
            }
            guard issuerPath.hasIntermediateMarker else {
                return .invalid("intermediate certificate lacks Apple's marker extension 1.2.840.113635.100.6.2.1")
            }
        }
        return .trusted(
            VerifiedChain(
                leaf: current, notBefore: max(current.notValidBefore, issuerPath.notBefore),
                notAfter: min(current.notValidAfter, issuerPath.notAfter)))
    }

    /// Remembers the intermediates of a trusted path, and every other offered certificate as parsed.
    private func remember(path: [Certificate], offered: [OfferedCertificate]) {
        var entries: [([UInt8], KnownCertificate)] = []
        for candidate in offered {
            var known = KnownCertificate(certificate: candidate.certificate)
            if let index = path.dropFirst().dropLast().firstIndex(of: candidate.certificate) {
                let rest = path[index...]
                known.issuerPath = IssuerPath(
                    notBefore: rest.map(\.notValidBefore).max() ?? candidate.certificate.notValidBefore,
                    notAfter: rest.map(\.notValidAfter).min() ?? candidate.certificate.notValidAfter,
                    length: rest.count,
                    hasIntermediateMarker: candidate.certificate.extensions[oid: Self.intermediateMarkerOID] != nil)
            }
            entries.append((candidate.der, known))
        }
        knownCertificates.withLock { known in
            if known.count + entries.count > Self.cacheCapacity { known.removeAll(keepingCapacity: true) }
            for (der, entry) in entries { known[ByteKey(der)] = entry }
        }
    }

    /// Builds and checks the whole path, every signature included; returns the path as far as it got.
    private func buildFullPath(
        leaf: Certificate, intermediates: [Certificate]
    ) -> (outcome: Outcome, path: [Certificate]) {
        var path = [leaf]
        let outcome = buildFullPath(leaf: leaf, intermediates: intermediates, path: &path)
        return (outcome, path)
    }

    private func buildFullPath(leaf: Certificate, intermediates: [Certificate], path: inout [Certificate]) -> Outcome {
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

/// Bytes as a dictionary key, hashed and compared in bulk: `[UInt8]`'s own `Hashable` feeds the hasher one byte at
/// a time, which made hashing a receipt's 4 KB of certificates cost more than reading its 187 purchases.
struct ByteKey: Hashable, Sendable {
    var bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (lhs: ByteKey, rhs: ByteKey) -> Bool {
        guard lhs.bytes.count == rhs.bytes.count else { return false }
        return lhs.bytes.withUnsafeBytes { left in
            rhs.bytes.withUnsafeBytes { right in
                guard let leftBase = left.baseAddress, let rightBase = right.baseAddress else { return true }
                return memcmp(leftBase, rightBase, left.count) == 0
            }
        }
    }
}

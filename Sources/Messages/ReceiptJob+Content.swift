import Crypto

extension ReceiptJob {
    /// SHA-256 (lower-case hex) of everything in the job that can change its verdict: the account, the expected
    /// bundle and product, and the proof (its kind and its exact text; a Google Play purchase's every field; a Google
    /// Play notification's every field but its Pub/Sub message id and publish time). Not the job id, the device or
    /// `submitted_at`, which do not change a decision.
    ///
    /// Two deliveries of one job have the same digest; a job id reused with another proof, account or expectation
    /// has another, and so another ``Verdict/verdictID`` (see ``Verdict/verdictID(for:)``).
    public var contentDigest: String {
        var hasher = SHA256()
        hasher.update(field: "schema", Self.schema)
        hasher.update(field: "account_id", accountID)
        hasher.update(field: "bundle_id", bundleID)
        hasher.update(field: "expected_product_id", expectedProductID)
        if case .googlePlay(let purchase) = proof {
            // Every field of the purchase: each can change the verdict (another app, product, token, signed data).
            hasher.update(field: "google_play.package_name", purchase.packageName)
            hasher.update(field: "google_play.product_id", purchase.productID)
            hasher.update(field: "google_play.purchase_token", purchase.purchaseToken)
            hasher.update(field: "google_play.purchase_data", purchase.purchaseData)
            hasher.update(field: "google_play.signature", purchase.signature)
        } else if case .googlePlayNotification(let notification) = proof {
            // What the notification says, not how it travelled: a redelivery under another message id, or the same
            // event seen through the reconciler, is the same content.
            hasher.update(field: "google_play_notification.package_name", notification.packageName)
            hasher.update(field: "google_play_notification.purchase_token", notification.purchaseToken)
            hasher.update(field: "google_play_notification.notification", notification.notification)
        } else {
            hasher.update(field: proof.fieldName, proof.value)
        }
        // Only when present: the digests (and verdict ids) of jobs without a token stay what they were.
        if let appAccountToken { hasher.update(field: "app_account_token", appAccountToken) }
        return hexString(hasher.finalize())
    }
}

extension SHA256 {
    /// Feeds one field as `name`, then its length and bytes (or a marker when absent): no two different jobs feed
    /// the same bytes, whatever their fields contain.
    fileprivate mutating func update(field name: String, _ value: String?) {
        var name = name
        name.withUTF8 { update(bufferPointer: UnsafeRawBufferPointer($0)) }
        guard var value else {
            var absent: UInt8 = 0x00
            withUnsafeBytes(of: &absent) { update(bufferPointer: $0) }
            return
        }
        value.withUTF8 { bytes in
            // The marker and the big-endian length, from the stack: no array per field (every job is hashed).
            var header: (UInt8, UInt64) = (0x01, UInt64(bytes.count).bigEndian)
            withUnsafeBytes(of: &header.0) { update(bufferPointer: $0) }
            withUnsafeBytes(of: &header.1) { update(bufferPointer: $0) }
            update(bufferPointer: UnsafeRawBufferPointer(bytes))
        }
    }
}

/// Lower-case hex SHA-256 of `bytes` (swift-crypto, BoringSSL's assembly).
func sha256Hex(_ bytes: [UInt8]) -> String { hexString(SHA256.hash(data: bytes)) }

private func hexString(_ digest: SHA256.Digest) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(SHA256.Digest.byteCount * 2)
    for byte in digest {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

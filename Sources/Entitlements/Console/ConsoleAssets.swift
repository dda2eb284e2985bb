import Hummingbird
import NIOCore

/// The support console's three files, served by the entitlement service itself at `/console`: no third-party
/// script, font or CDN, so it works without internet, and a strict Content-Security-Policy (scripts and styles
/// from this origin only, no inline code). It logs in with an API token (kept in the tab's session storage, sent as
/// `Authorization: Bearer`) and only calls the API; every value is put on the page as text, never as HTML.
public enum ConsoleAssets {
    public struct Asset: Sendable {
        public let contentType: String
        public let body: String
    }

    /// Paths and their files. Anything else under `/console` is a 404: nothing is read from disk.
    public static let routes: [(String, Asset)] = [
        ("console", Asset(contentType: "text/html; charset=utf-8", body: ConsoleHTML.page)),
        ("console/app.css", Asset(contentType: "text/css; charset=utf-8", body: ConsoleCSS.sheet)),
        ("console/app.js", Asset(contentType: "text/javascript; charset=utf-8", body: ConsoleScript.source)),
    ]

    static let policy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    static func response(_ asset: Asset) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: asset.contentType, .cacheControl: "no-store",
                .contentSecurityPolicy: policy, HTTPFields.Element.Name("X-Content-Type-Options")!: "nosniff",
                HTTPFields.Element.Name("X-Frame-Options")!: "DENY",
                HTTPFields.Element.Name("Referrer-Policy")!: "no-referrer",
            ],
            body: .init(byteBuffer: ByteBuffer(string: asset.body)))
    }
}

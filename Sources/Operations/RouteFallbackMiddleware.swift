import Foundation
import Hummingbird

/// Answers the requests a router's routes do not take, for a router whose every path it lists: a known path asked
/// with another method gets `405` with `Allow` and a JSON error (`method_not_allowed`), an unknown path `404` with a
/// JSON error (`not_found`), instead of Hummingbird's empty 404 for both. Add it before the routes.
public struct RouteFallbackMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Each path (without its leading `/`) and the methods its routes take.
    public let methods: [String: [HTTPRequest.Method]]

    public init(methods: [String: [HTTPRequest.Method]]) {
        self.methods = methods
    }

    public func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let path = request.uri.path.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
        guard let allowed = methods[path] else {
            return Self.error(404, "not_found", "no such path", for: request)
        }
        guard allowed.contains(request.method) else {
            let names = allowed.map(\.rawValue).joined(separator: ", ")
            var response = Self.error(
                405, "method_not_allowed", "\(request.method.rawValue) is not allowed here; allowed: \(names)",
                for: request)
            response.headers[.allow] = names
            return response
        }
        return try await next(request, context)
    }

    /// `{"error": code, "message": …}`, the shape of every JSON error of this project's HTTP services; a `HEAD` gets the
    /// status and headers only.
    static func error(_ status: Int, _ code: String, _ message: String, for request: Request) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var bytes = (try? Array(encoder.encode(["error": code, "message": message]))) ?? Array("{}".utf8)
        bytes.append(UInt8(ascii: "\n"))
        var headers: HTTPFields = [.contentType: "application/json"]
        if request.method == .head {
            headers[.contentLength] = String(bytes.count)
            return Response(status: HTTPResponse.Status(code: status), headers: headers)
        }
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

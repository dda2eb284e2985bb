import Foundation
import Hummingbird

extension Router {
    /// A simulator's counting routes: `GET /sim/stats` answers `snapshot()` as JSON with sorted keys, and
    /// `POST /sim/stats/reset` calls `reset()` and answers `{}`. `respond` makes the simulator's response from an
    /// HTTP status and a JSON body.
    public func addSimulatorStatsRoutes<Snapshot: Encodable & Sendable>(
        snapshot: @escaping @Sendable () -> Snapshot, reset: @escaping @Sendable () -> Void,
        respond: @escaping @Sendable (_ status: Int, _ body: [UInt8]) -> Response
    ) {
        get("sim/stats") { _, _ -> Response in
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            return respond(200, Array(try encoder.encode(snapshot())))
        }
        post("sim/stats/reset") { _, _ -> Response in
            reset()
            return respond(200, Array("{}".utf8))
        }
    }
}

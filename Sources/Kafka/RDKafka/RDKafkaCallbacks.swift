import CRdKafka
import Dispatch
import Logging
import Observability
import Synchronization

/// What librdkafka's client-wide callbacks (error, log, rebalance, offset commit) reach through the
/// handle's opaque pointer. Owned by the `RDKafkaClient`, so it outlives the handle.
final class RDKafkaCallbackContext: Sendable {
    let logger: Logger
    /// Set once by the error callback when librdkafka raises a fatal error.
    let fatalError = Mutex<KafkaError?>(nil)
    /// Present for consumers only.
    let rebalance: ConsumerRebalanceHandler?
    /// Set by the error callback when librdkafka reports every broker down.
    let brokers = KafkaBrokerState()

    init(logger: Logger, rebalance: ConsumerRebalanceHandler? = nil) {
        self.logger = logger
        self.rebalance = rebalance
    }

    static func from(_ opaque: UnsafeMutableRawPointer?) -> RDKafkaCallbackContext? {
        opaque.map { Unmanaged<RDKafkaCallbackContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Installs the callbacks every client gets. The conf's opaque must be this context.
    static func installCommonCallbacks(on conf: OpaquePointer) {
        rd_kafka_conf_set_error_cb(conf, rdKafkaErrorCallback)
        rd_kafka_conf_set_log_cb(conf, rdKafkaLogCallback)
    }
}

/// librdkafka reports client-wide errors here (from its own threads or from a poll call). Most are
/// informational (a broker went away and librdkafka reconnects); `_FATAL` makes the client unusable.
private func rdKafkaErrorCallback(
    rk: OpaquePointer?, err: Int32, reason: UnsafePointer<CChar>?, opaque: UnsafeMutableRawPointer?
) {
    guard let context = RDKafkaCallbackContext.from(opaque) else { return }
    let code = rd_kafka_resp_err_t(rawValue: err)
    if code == RD_KAFKA_RESP_ERR__FATAL, let rk {
        let fatal =
            KafkaError.fatalError(of: rk)
            ?? KafkaError(code, context: reason.map { String(cString: $0) })
        context.fatalError.withLock { if $0 == nil { $0 = fatal } }
        context.logger.critical("kafka fatal error", metadata: [LogKeys.error: "\(fatal)"])
        return
    }
    // librdkafka reports no recovery: `KafkaProducer.watchBrokers` asks the brokers until one answers.
    if code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN { context.brokers.markAllDown() }
    context.logger.warning(
        "kafka client error",
        metadata: [
            LogKeys.kafkaErrorCode: "\(KafkaError.Code(rawValue: err))",
            LogKeys.kafkaReason: "\(reason.map { String(cString: $0) } ?? "")",
        ])
}

/// Routes librdkafka's syslog-levelled log lines to swift-log.
private func rdKafkaLogCallback(
    rk: OpaquePointer?, level: Int32, facility: UnsafePointer<CChar>?, text: UnsafePointer<CChar>?
) {
    guard let rk, let context = RDKafkaCallbackContext.from(rd_kafka_opaque(rk)) else { return }
    let message = text.map { String(cString: $0) } ?? ""
    let facilityName = facility.map { String(cString: $0) } ?? ""
    var logLevel: Logger.Level
    switch level {
    case ...3: logLevel = .error
    case 4: logLevel = .warning
    case 5: logLevel = .notice
    case 6: logLevel = .info
    default: logLevel = .debug
    }
    // One property set (`kafka_properties`) serves a worker's consumers and producers alike, so librdkafka's note
    // that a consumer property is ignored by a producer (or the reverse) is expected, not a warning.
    if facilityName == "CONFWARN", message.contains(" property and will be ignored by this ") { logLevel = .debug }
    context.logger.log(level: logLevel, "\(message)", metadata: [LogKeys.kafkaFacility: "\(facilityName)"])
}

/// A stop flag shared between an owner and its poll thread.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// Signalled once (by a thread that ends); any number of async callers can await it.
final class CompletionSignal: Sendable {
    private struct State {
        var done = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func signal() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.done = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                if state.done { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}

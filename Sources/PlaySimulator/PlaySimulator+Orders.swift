import Foundation
import Messages
import Synchronization

/// A chargeback Google asks the developer about: the `pendingRefundToken` its notification carries, and 24 hours to
/// answer once with `orders.reviewrefund`.
public struct PlayRefundReview: Sendable {
    public var pendingRefundToken: String
    public var packageName: String
    public var purchaseToken: String
    public var orderId: String
    public var createdAt: Date
    public var deadline: Date
    /// Every `orders.reviewrefund` call that reached the review, accepted or refused.
    public var answers: [PlayRefundReviewAnswer] = []
    /// How Google decided the chargeback (`chargeback_resolve`): true refunded, false kept; nil undecided.
    public var refunded: Bool?

    /// The accepted answer, if any.
    public var accepted: PlayRefundReviewAnswer? { answers.first { $0.status == 200 } }
}

/// One `orders.reviewrefund` call: its body, the clock time, and the status answered.
public struct PlayRefundReviewAnswer: Sendable {
    public var at: Date
    /// Seconds after the review was created.
    public var secondsAfterCreation: TimeInterval
    public var status: Int
    /// Why it was refused; nil when accepted.
    public var refusal: String?
    /// The request body as JSON text.
    public var body: String
}

/// The refund reviews, by order id.
final class PlayRefundReviews: Sendable {
    private let reviews = Mutex<[String: PlayRefundReview]>([:])
    private let order = Mutex<[String]>([])

    /// Adds a review; a new review of an order whose earlier one was decided takes its place.
    func add(_ review: PlayRefundReview) {
        let isNew = reviews.withLock { rows in
            defer { rows[review.orderId] = review }
            return rows[review.orderId] == nil
        }
        if isNew { order.withLock { $0.append(review.orderId) } }
    }

    func review(orderId: String) -> PlayRefundReview? { reviews.withLock { $0[orderId] } }

    func update<R>(orderId: String, _ body: (inout PlayRefundReview?) -> R) -> R {
        reviews.withLock { rows in
            var row = rows[orderId]
            let result = body(&row)
            if let row { rows[orderId] = row }
            return result
        }
    }

    /// Every review, in the order created.
    func all() -> [PlayRefundReview] {
        let ids = order.withLock { $0 }
        return reviews.withLock { rows in ids.compactMap { rows[$0] } }
    }
}

extension PlayReply {
    static func failedPrecondition(_ message: String, reason: String) -> PlayReply {
        PlayReply(
            400,
            PlayAPIAnswers.error(
                400, message, status: "FAILED_PRECONDITION", reason: reason, domain: "androidpublisher"))
    }

    static let orderNotFound = PlayReply(
        404,
        PlayAPIAnswers.error(
            404, "The order was not found.", status: "NOT_FOUND", reason: "notFound", location: "orderId",
            locationType: "parameter"))
}

extension PlaySimulator {
    /// How long Google waits for the developer's answer to a refund review.
    static let refundReviewWindow: TimeInterval = 24 * 3600

    /// `POST …/orders/{orderId}:reviewrefund`: checks the body as Google's reference says, then accepts exactly one
    /// answer per review inside its 24 hours; every call that reaches a review is recorded with its time.
    func reviewRefund(packageName: String, orderId: String, body: [UInt8]) -> PlayReply {
        let now = clock.now()
        guard
            let request = (try? JSONSerialization.jsonObject(with: Data(body.isEmpty ? Array("{}".utf8) : body)))
                as? [String: Any]
        else { return .badJSON }
        // The body is recorded as sent (a simulator's record; it holds no secret).
        guard let known = reviews.review(orderId: orderId), known.packageName == packageName else {
            guard
                registry.all().contains(where: {
                    $0.packageName == packageName && PlayAPIAnswers.orderIds($0).contains(orderId)
                })
            else { return .orderNotFound }
            return .failedPrecondition("The order has no pending refund review.", reason: "noPendingRefundReview")
        }
        var refusal: PlayReply?
        if let problem = Self.reviewRefundProblem(body) {
            refusal = .invalid(problem)
        } else if request["pendingRefundToken"] as? String != known.pendingRefundToken {
            refusal = .invalid("The pendingRefundToken does not match the order's pending refund review.")
        } else if now > known.deadline {
            refusal = .failedPrecondition(
                "The refund review's deadline has passed.", reason: "refundReviewDeadlineExceeded")
        } else if known.accepted != nil {
            refusal = .failedPrecondition(
                "The refund review has already been answered.", reason: "refundReviewAlreadyAnswered")
        }
        let reply = refusal ?? PlayReply(200, PlayAPIAnswers.json([String: Any]()))
        let answer = PlayRefundReviewAnswer(
            at: now, secondsAfterCreation: now.timeIntervalSince(known.createdAt), status: reply.status,
            refusal: refusal.map { _ in Self.errorMessage(reply) }, body: String(decoding: body, as: UTF8.self))
        return reviews.update(orderId: orderId) { row -> PlayReply in
            // Checked again under the lock: of two concurrent answers only one is accepted.
            if refusal == nil, row?.accepted != nil {
                let twice = PlayReply.failedPrecondition(
                    "The refund review has already been answered.", reason: "refundReviewAlreadyAnswered")
                var late = answer
                late.status = twice.status
                late.refusal = Self.errorMessage(twice)
                row?.answers.append(late)
                return twice
            }
            row?.answers.append(answer)
            return reply
        }
    }

    /// `OrdersReviewRefundRequest`, read strictly: a field of the wrong JSON type is refused.
    private struct ReviewRefundRequest: Decodable {
        struct UsageEvent: Decodable {
            var consumptionTime: String?
            var consumptionItemDescription: String?
        }
        var pendingRefundToken: String?
        var refundPreference: String?
        var sampleContentProvided: Bool?
        var consumptionPercentageMilliunits: Int?
        var consumptionUsageEvents: [UsageEvent]?
    }

    /// What is wrong with an `OrdersReviewRefundRequest`, per the reference; nil when it is well formed.
    /// `sampleContentProvided` is marked required, but a JSON boolean left out reads as false in Google's protocol
    /// buffers, so only a value of another type is refused.
    static func reviewRefundProblem(_ body: [UInt8]) -> String? {
        let request: ReviewRefundRequest
        do {
            request = try JSONDecoder().decode(
                ReviewRefundRequest.self, from: Data(body.isEmpty ? Array("{}".utf8) : body))
        } catch DecodingError.typeMismatch(_, let context), DecodingError.dataCorrupted(let context) {
            let field = context.codingPath.first?.stringValue ?? "the body"
            return "Invalid value at '\(field)'."
        } catch {
            return "Invalid request body."
        }
        guard let token = request.pendingRefundToken, !token.isEmpty else { return "pendingRefundToken is required." }
        guard let preference = request.refundPreference else { return "refundPreference is required." }
        guard ["DECLINE", "APPROVE", "NEUTRAL"].contains(preference) else {
            return "refundPreference must be DECLINE, APPROVE or NEUTRAL."
        }
        if let milliunits = request.consumptionPercentageMilliunits, !(0...100_000).contains(milliunits) {
            return "consumptionPercentageMilliunits must be from 0 to 100000."
        }
        if let events = request.consumptionUsageEvents, events.count > 1000 {
            return "consumptionUsageEvents holds more than 1000 events."
        }
        return nil
    }

    static func errorMessage(_ reply: PlayReply) -> String {
        let object = (try? JSONSerialization.jsonObject(with: Data(reply.body))) as? [String: Any]
        return ((object?["error"] as? [String: Any])?["message"] as? String) ?? ""
    }

    /// `/sim/reviews`.
    func reviewsReport() -> [String: Any] {
        let now = clock.now()
        return [
            "reviews": reviews.all().map { review -> [String: Any] in
                var object: [String: Any] = [
                    "order_id": review.orderId, "purchase_token": review.purchaseToken,
                    "package_name": review.packageName, "pending_refund_token": review.pendingRefundToken,
                    "created_at_ms": review.createdAt.epochMilliseconds,
                    "deadline_ms": review.deadline.epochMilliseconds,
                    "open": review.accepted == nil && now <= review.deadline,
                    "accepted_answers": review.answers.filter { $0.status == 200 }.count,
                    "answers": review.answers.map { answer -> [String: Any] in
                        var entry: [String: Any] = [
                            "at_ms": answer.at.epochMilliseconds, "seconds_after_creation": answer.secondsAfterCreation,
                            "status": answer.status,
                            "body": (try? JSONSerialization.jsonObject(with: Data(answer.body.utf8))) ?? [:],
                        ]
                        if let refusal = answer.refusal { entry["refusal"] = refusal }
                        return entry
                    },
                ]
                if let refunded = review.refunded { object["refunded"] = refunded }
                return object
            }
        ]
    }
}

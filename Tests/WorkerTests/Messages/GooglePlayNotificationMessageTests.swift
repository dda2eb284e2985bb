import Foundation
import Testing

@testable import Messages

/// The contract of Google Play notification jobs (docs/messages.md, "Google Play notification jobs"): the sixth proof
/// field, its rules at each limit, the reserved account, job ids and message keys, and the DeveloperNotification
/// parse of every kind Google sends.
@Suite("Google Play notification jobs in the message contract", .timeLimit(.minutes(2)))
struct GooglePlayNotificationMessageTests {
    let codec = MessageCodec()
    static let at = Date(timeIntervalSince1970: 1_795_000_000)

    static let text =
        #"{"version":"1.0","packageName":"com.example.app","eventTimeMillis":"1795000000123","subscriptionNotification":{"version":"1.0","notificationType":2,"purchaseToken":"tok.en-1_x"}}"#

    static func notification(
        token: String? = "tok.en-1_x", text: String? = GooglePlayNotificationMessageTests.text,
        messageID: String? = "136969346945", publishedAt: Date? = at
    ) -> GooglePlayNotification {
        GooglePlayNotification(
            packageName: "com.example.app", purchaseToken: token, notification: text, messageID: messageID,
            publishedAt: publishedAt)
    }

    static func job(
        _ notification: GooglePlayNotification = notification(), accountID: String = "google-play-notification"
    )
        -> ReceiptJob
    {
        ReceiptJob(
            jobID: "google-play-notification-1", accountID: accountID, proof: .googlePlayNotification(notification),
            submittedAt: at)
    }

    @Test("a notification job is written as JSONEncoder writes it and read back equal, every optional field or none")
    func roundTrip() throws {
        let shapes = [
            Self.notification(),
            Self.notification(messageID: nil, publishedAt: nil),
            Self.notification(token: nil),
            Self.notification(text: nil, messageID: nil, publishedAt: nil),
        ]
        for notification in shapes {
            let job = Self.job(notification)
            let bytes = codec.encode(job)
            #expect(bytes == MessageCodec.encodeValue(job))
            #expect(try codec.decodeJob(bytes) == job)
            #expect(try codec.decode(ReceiptJob.self, from: bytes) == job)
            #expect(job.proof.store == .googlePlay)
            #expect(job.proof.fieldName == "google_play_notification")
            #expect(job.proof.value == (notification.purchaseToken ?? ""))
        }
        // Without escapes the fast reader takes it.
        let plain = Self.job(Self.notification(text: nil))
        #expect(MessageJSONReader.job(from: codec.encode(plain)) == plain)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(codec.encode(Self.job()))) as? [String: Any])
        let field = try #require(object["google_play_notification"] as? [String: Any])
        #expect(field["notification"] as? String == Self.text)
        #expect(field["message_id"] as? String == "136969346945")
        #expect(field["published_at"] as? String == "2026-11-18T11:06:40.000Z")
    }

    static func refusal(_ job: ReceiptJob) -> MessageError? {
        do {
            try job.validate()
            return nil
        } catch let error as MessageError {
            return error
        } catch {
            return MessageError(.invalidValue, "unexpected \(error)")
        }
    }

    @Test("each rule holds at its limit and refuses just over it, naming the field")
    func validationEdges() {
        let longest = String(repeating: "t", count: GooglePlayNotification.maximumPurchaseTokenLength)
        #expect(Self.refusal(Self.job(Self.notification(token: longest))) == nil)
        #expect(
            Self.refusal(Self.job(Self.notification(token: longest + "t")))?.field
                == "google_play_notification.purchase_token")
        #expect(
            Self.refusal(Self.job(Self.notification(token: "")))?.field == "google_play_notification.purchase_token")
        #expect(
            Self.refusal(Self.job(Self.notification(token: "a\u{0}b")))?.field
                == "google_play_notification.purchase_token")
        #expect(Self.refusal(Self.job(Self.notification(text: "")))?.field == "google_play_notification.notification")
        let longestID = String(repeating: "9", count: GooglePlayNotification.maximumMessageIDLength)
        #expect(Self.refusal(Self.job(Self.notification(messageID: longestID))) == nil)
        #expect(Self.refusal(Self.job(Self.notification(messageID: "a-B-1"))) == nil)
        for bad in [longestID + "9", "", "12 3", "12/3", "1.2", "é"] {
            #expect(
                Self.refusal(Self.job(Self.notification(messageID: bad)))?.field
                    == "google_play_notification.message_id", "\(bad)")
        }
        #expect(Self.refusal(Self.job(Self.notification(token: nil, text: nil)))?.code == .missingField)
        // A token alone (the reconciler's re-read) and a notification alone (a test notification) are both jobs.
        #expect(Self.refusal(Self.job(Self.notification(text: nil))) == nil)
        #expect(Self.refusal(Self.job(Self.notification(token: nil))) == nil)
        var package = Self.notification()
        package.packageName = ""
        #expect(Self.refusal(Self.job(package))?.field == "google_play_notification.package_name")
        package.packageName = String(repeating: "p", count: ReceiptJob.maximumIdentifierLength + 1)
        #expect(Self.refusal(Self.job(package))?.field == "google_play_notification.package_name")
        package.packageName = String(repeating: "p", count: ReceiptJob.maximumIdentifierLength)
        #expect(Self.refusal(Self.job(package)) == nil)
    }

    @Test("bad shapes from the wire are refused by both readers with the codec's codes")
    func wireRefusals() {
        let prefix = #"{"schema":"receipt-job/v1","job_id":"j","account_id":"google-play-notification","#
        let cases: [(String, MessageError.Code)] = [
            (#""google_play_notification":"t"}"#, .wrongType),
            (#""google_play_notification":{"purchase_token":"t"}}"#, .missingField),
            (#""google_play_notification":{"package_name":"p"}}"#, .missingField),
            (#""google_play_notification":{"package_name":"p","purchase_token":""}}"#, .invalidValue),
            (
                #""google_play_notification":{"package_name":"p","purchase_token":"t","message_id":"a b"}}"#,
                .invalidValue
            ),
            (#""google_play_notification":{"package_name":"p","purchase_token":7}}"#, .wrongType),
            (
                #""notification":"x","google_play_notification":{"package_name":"p","purchase_token":"t"}}"#,
                .invalidValue
            ),
        ]
        for (tail, code) in cases {
            let bytes = Array((prefix + tail).utf8)
            #expect(MessageJSONReader.job(from: bytes) == nil, "\(tail)")
            #expect(throws: MessageError.self, "\(tail)") { try codec.decodeJob(bytes) }
            do {
                _ = try codec.decodeJob(bytes)
            } catch {
                #expect(error.code == code, "\(tail): \(error)")
            }
        }
    }

    @Test("the reserved accounts: a frontend job may not take either notification account or its lanes")
    func reservedAccount() {
        for account in ["google-play-notification", "google-play-notification/tok", "apple-notification"] {
            let frontend = ReceiptJob(jobID: "j", accountID: account, proof: .receipt("r"))
            #expect(Self.refusal(frontend)?.field == "account_id", "\(account)")
            let play = ReceiptJob(
                jobID: "j", accountID: account,
                proof: .googlePlay(GooglePlayPurchase(packageName: "p", productID: "x", purchaseToken: "t")))
            #expect(Self.refusal(play)?.field == "account_id", "\(account)")
            #expect(ReceiptJob.isReservedAccountID(account))
        }
        // Each store's notification account is its own: Apple's notification may not take Google's, nor the reverse.
        #expect(Self.refusal(Self.job(accountID: "google-play-notification")) == nil)
        #expect(Self.refusal(Self.job(accountID: "apple-notification"))?.field == "account_id")
        let apple = ReceiptJob(jobID: "j", accountID: "google-play-notification", proof: .notification("a.b.c"))
        #expect(Self.refusal(apple)?.field == "account_id")
        // A name that merely starts like it is no lane.
        #expect(!ReceiptJob.isReservedAccountID("google-play-notifications"))
        #expect(
            Self.refusal(ReceiptJob(jobID: "j", accountID: "google-play-notifications", proof: .receipt("r"))) == nil)
    }

    @Test("job ids and message keys are derived as the contract says")
    func derivations() {
        let job = GooglePlayNotificationJob.job(
            packageName: "com.example.app", purchaseToken: "tok", notification: Self.text, messageID: "136969346945",
            publishedAt: Self.at, submittedAt: Self.at)
        #expect(job.jobID == "google-play-notification-136969346945")
        #expect(job.accountID == "google-play-notification")
        #expect(String(decoding: job.messageKey, as: UTF8.self) == "google-play-notification/tok")
        #expect(Self.refusal(job) == nil)
        let test = GooglePlayNotificationJob.job(
            packageName: "com.example.app", purchaseToken: nil, notification: "{}", messageID: "7", accountID: "rtdn",
            submittedAt: Self.at)
        #expect(String(decoding: test.messageKey, as: UTF8.self) == "rtdn/test")
        #expect(GooglePlayNotificationJob.voidedJobID(orderID: "GPA.1234-5678") == "google-play-voided-GPA.1234-5678")
        // SHA-256("tok") = 1a7674eb4ee78df7e1ac439a93c3fa8e3c945784d4dec9fd8e3011738b2f1d62
        #expect(
            GooglePlayNotificationJob.rereadJobID(
                purchaseToken: "tok", expiryMillis: 1_795_000_000_000, state: "grace", rereadMillis: 1_794_999_400_000)
                == "google-play-reread-1a7674eb4ee78df7-1795000000000-grace-1794999400000")
        // A redelivery (the same message) is the same job, key and content; another message id changes only the id.
        let again = GooglePlayNotificationJob.job(
            packageName: "com.example.app", purchaseToken: "tok", notification: Self.text, messageID: "136969346945",
            publishedAt: Self.at, submittedAt: Self.at.addingTimeInterval(5))
        #expect(again.jobID == job.jobID && again.messageKey == job.messageKey)
        #expect(again.contentDigest == job.contentDigest)
        let other = GooglePlayNotificationJob.job(
            packageName: "com.example.app", purchaseToken: "tok", notification: Self.text, messageID: "99",
            submittedAt: Self.at)
        #expect(other.contentDigest == job.contentDigest)
        let otherToken = GooglePlayNotificationJob.job(
            packageName: "com.example.app", purchaseToken: "tok2", notification: Self.text, messageID: "99",
            submittedAt: Self.at)
        #expect(otherToken.contentDigest != job.contentDigest)
        let otherText = GooglePlayNotificationJob.job(
            packageName: "com.example.app", purchaseToken: "tok", notification: nil, messageID: "99",
            submittedAt: Self.at)
        #expect(otherText.contentDigest != job.contentDigest)
    }

    // MARK: DeveloperNotification

    @Test("every subscription type Google documents parses with its number and name; an unknown number is kept")
    func subscriptionTypes() throws {
        let numbers = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 18, 19, 20, 22]
        #expect(DeveloperNotification.SubscriptionType.allCases.map(\.rawValue) == numbers)
        #expect(DeveloperNotification.SubscriptionType.recovered.name == "SUBSCRIPTION_RECOVERED")
        #expect(
            DeveloperNotification.SubscriptionType.pendingPurchaseCanceled.name
                == "SUBSCRIPTION_PENDING_PURCHASE_CANCELED")
        #expect(
            DeveloperNotification.SubscriptionType.priceStepUpConsentUpdated.name
                == "SUBSCRIPTION_PRICE_STEP_UP_CONSENT_UPDATED")
        for number in numbers + [99] {
            let text =
                #"{"version":"1.0","packageName":"p","eventTimeMillis":"5","subscriptionNotification":{"version":"1.0","notificationType":\#(number),"purchaseToken":"t"}}"#
            let parsed = try DeveloperNotification.parse(text)
            guard case .subscription(let subscription) = parsed.kind else {
                Issue.record("not a subscription notification: \(parsed.kind)")
                continue
            }
            #expect(subscription.notificationType == number)
            #expect(subscription.type?.rawValue == (number == 99 ? nil : number))
            #expect(parsed.purchaseToken == "t")
            #expect(parsed.eventTimeMillis == 5)
            #expect(parsed.packageName == "p")
        }
    }

    @Test("one-time, voided, refund review, test and unknown notifications parse")
    func otherKinds() throws {
        let oneTime = try DeveloperNotification.parse(
            #"{"version":"1.0","packageName":"p","eventTimeMillis":1,"oneTimeProductNotification":{"version":"1.0","notificationType":2,"purchaseToken":"t","sku":"coins"}}"#
        )
        #expect(
            oneTime.kind
                == .oneTimeProduct(.init(version: "1.0", notificationType: 2, purchaseToken: "t", sku: "coins")))
        #expect(DeveloperNotification.OneTimeProductType(rawValue: 1)?.name == "ONE_TIME_PRODUCT_PURCHASED")
        #expect(DeveloperNotification.OneTimeProductType(rawValue: 2)?.name == "ONE_TIME_PRODUCT_CANCELED")

        let voided = try DeveloperNotification.parse(
            #"{"version":"1.0","packageName":"p","eventTimeMillis":"1","voidedPurchaseNotification":{"purchaseToken":"t","orderId":"GPA.1","productType":1,"refundType":2}}"#
        )
        guard case .voidedPurchase(let v) = voided.kind else {
            Issue.record("not voided: \(voided.kind)")
            return
        }
        #expect(v.orderID == "GPA.1" && v.purchaseToken == "t")
        #expect(v.voidedProductType == .subscription && v.voidedRefundType == .quantityBasedPartialRefund)
        #expect(DeveloperNotification.VoidedProductType.oneTime.name == "PRODUCT_TYPE_ONE_TIME")
        #expect(DeveloperNotification.VoidedRefundType.fullRefund.name == "REFUND_TYPE_FULL_REFUND")

        let review = try DeveloperNotification.parse(
            #"{"version":"1.0","packageName":"p","eventTimeMillis":"1","pendingRefundReviewNotification":{"purchaseToken":"t","orderId":"GPA.2","pendingRefundToken":"r"}}"#
        )
        #expect(
            review.kind == .pendingRefundReview(.init(purchaseToken: "t", orderID: "GPA.2", pendingRefundToken: "r")))
        #expect(review.purchaseToken == "t")

        let test = try DeveloperNotification.parse(
            #"{"version":"1.0","packageName":"p","eventTimeMillis":"1","testNotification":{"version":"1.0"}}"#)
        #expect(test.kind == .test(version: "1.0"))
        #expect(test.purchaseToken == nil)

        let unknown = try DeveloperNotification.parse(
            #"{"version":"1.0","packageName":"p","eventTimeMillis":"1","futureThingNotification":{"x":1}}"#)
        #expect(unknown.kind == .unknown("futureThingNotification"))
        #expect(unknown.purchaseToken == nil)
    }

    @Test("what is not a DeveloperNotification is refused with a reason, never a crash")
    func parseRefusals() {
        let cases: [(String, DeveloperNotification.Failure)] = [
            ("not json", .notJSONObject),
            ("[1]", .notJSONObject),
            (#""text""#, .notJSONObject),
            (#"{"version":"1.0","eventTimeMillis":"1","testNotification":{}}"#, .invalidField("packageName")),
            (#"{"packageName":7,"testNotification":{}}"#, .invalidField("packageName")),
            (#"{"packageName":"p","eventTimeMillis":"soon","testNotification":{}}"#, .invalidField("eventTimeMillis")),
            (#"{"packageName":"p"}"#, .noNotification),
            (#"{"packageName":"p","testNotification":{},"subscriptionNotification":{}}"#, .severalNotifications),
            (
                #"{"packageName":"p","subscriptionNotification":{"notificationType":2}}"#,
                .invalidField("subscriptionNotification.purchaseToken")
            ),
            (
                #"{"packageName":"p","subscriptionNotification":{"notificationType":true,"purchaseToken":"t"}}"#,
                .invalidField("subscriptionNotification.notificationType")
            ),
            (
                #"{"packageName":"p","subscriptionNotification":{"notificationType":2.5,"purchaseToken":"t"}}"#,
                .invalidField("subscriptionNotification.notificationType")
            ),
            (
                #"{"packageName":"p","voidedPurchaseNotification":{"purchaseToken":"t"}}"#,
                .invalidField("voidedPurchaseNotification.orderId")
            ),
        ]
        for (text, failure) in cases {
            #expect(throws: failure, "\(text)") { try DeveloperNotification.parse(text) }
        }
    }
}

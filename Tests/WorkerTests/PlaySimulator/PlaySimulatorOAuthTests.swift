import Foundation
import PlaySimulator
import Testing

@Suite("Play simulator: OAuth token endpoint", .timeLimit(.minutes(2)))
struct PlaySimulatorOAuthTests {
    @Test("an issued service account's key file is Google's JSON, and its assertion gets a Bearer token")
    func validAssertion() async throws {
        try await PlaySimHarness.with { sim in
            let keyFile = try #require(
                try JSONSerialization.jsonObject(with: sim.account.keyFileJSON()) as? [String: Any])
            #expect(keyFile["type"] as? String == "service_account")
            #expect(keyFile["client_email"] as? String == sim.account.clientEmail)
            #expect(keyFile["private_key_id"] as? String == sim.account.privateKeyId)
            #expect((keyFile["private_key"] as? String)?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
            #expect(keyFile["token_uri"] as? String == "\(sim.base)/token")
            #expect((keyFile["client_id"] as? String)?.wholeMatch(of: /\d{21}/) != nil)

            let reply = try await sim.exchange(try sim.assertion())
            #expect(reply.status == 200)
            #expect(reply.json["token_type"] as? String == "Bearer")
            #expect(reply.json["expires_in"] as? Int == 3599)
            #expect((reply.json["access_token"] as? String)?.isEmpty == false)
            // Google's own token URL is an audience Google accepts too.
            let google = try await sim.exchange(try sim.assertion(audience: "https://oauth2.googleapis.com/token"))
            #expect(google.status == 200)
        }
    }

    @Test("the token endpoint refuses a wrongly signed assertion, a bad aud, an expired or too long one, a bad scope")
    func refusals() async throws {
        try await PlaySimHarness.with { sim in
            let stranger = try PlaySimHarness.sharedKeys.get().stranger
            let cases: [(String, String, String)] = [
                (try sim.assertion(key: stranger), "invalid_grant", "Invalid JWT Signature."),
                (
                    try sim.assertion(audience: "https://example.com/token"), "invalid_grant",
                    "Invalid JWT: Failed audience check."
                ),
                (
                    try sim.assertion(issuedAt: sim.clock.now().addingTimeInterval(-7200)), "invalid_grant",
                    "Invalid JWT: Token"
                ),
                (try sim.assertion(lifetime: 7200), "invalid_grant", "Invalid JWT: Token"),
                (
                    try sim.assertion(scope: "https://www.googleapis.com/auth/cloud-platform"), "invalid_scope",
                    "Invalid OAuth scope"
                ),
                ("not.a-jwt", "invalid_grant", "Invalid JWT"),
            ]
            for (assertion, error, description) in cases {
                let reply = try await sim.exchange(assertion)
                #expect(reply.status == 400, "\(description)")
                #expect(reply.json["error"] as? String == error)
                #expect((reply.json["error_description"] as? String)?.hasPrefix(description) == true)
                #expect(reply.json["access_token"] == nil)
            }
            let wrongGrant = try await sim.request(
                "POST", "token", body: Array("grant_type=password&assertion=x".utf8),
                contentType: "application/x-www-form-urlencoded")
            #expect(wrongGrant.status == 400 && wrongGrant.json["error"] as? String == "unsupported_grant_type")
        }
    }

    @Test("an unknown or expired bearer token gets 401 from the API; tokens expire on the simulator's clock")
    func bearerTokens() async throws {
        try await PlaySimHarness.with({ $0.accessTokenLifetime = 600 }) { sim in
            let token = try #require(try await sim.mint()["purchase_token"] as? String)
            let path = PlaySimHarness.productPath(token)

            let none = try await sim.get(path)
            #expect(none.status == 401)
            #expect(none.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
            let unknown = try await sim.get(path, bearer: "ya29.not-issued")
            #expect(unknown.status == 401)
            #expect((unknown.json["error"] as? [String: Any])?["status"] as? String == "UNAUTHENTICATED")

            let exchanged = try await sim.exchange(try sim.assertion())
            #expect(exchanged.json["expires_in"] as? Int == 600)
            let bearer = try #require(exchanged.json["access_token"] as? String)
            #expect(try await sim.get(path, bearer: bearer).status == 200)
            sim.clock.advance(by: 599)
            #expect(try await sim.get(path, bearer: bearer).status == 200)
            sim.clock.advance(by: 1)
            #expect(try await sim.get(path, bearer: bearer).status == 401)
        }
    }

    @Test(
        "an account limited to other packages gets Google's 401 permissionDenied; POST /sim/service-accounts issues one"
    )
    func packageAccess() async throws {
        try await PlaySimHarness.with { sim in
            let token = try #require(try await sim.mint()["purchase_token"] as? String)
            let other = try sim.simulator.issueServiceAccount(
                packages: ["com.example.other"], key: try PlaySimHarness.sharedKeys.get().stranger)
            let limited = PlaySimHarness(simulator: sim.simulator, task: sim.task, base: sim.base, account: other)
            let denied = try await sim.get(PlaySimHarness.productPath(token), bearer: try await limited.accessToken())
            #expect(denied.status == 401)
            #expect(denied.reason == "permissionDenied")

            let reply = try await sim.post(
                "sim/service-accounts", ["client_email": "ops@example.iam.gserviceaccount.com"])
            #expect(reply.status == 200)
            #expect(reply.json["type"] as? String == "service_account")
            #expect(reply.json["client_email"] as? String == "ops@example.iam.gserviceaccount.com")
            #expect((reply.json["private_key"] as? String)?.contains("BEGIN PRIVATE KEY") == true)
        }
    }
}

import Deployment
import Foundation
import Reconciliation
import SignedData
import Testing

@Suite("The configuration contract")
struct SettingsTests {
    @Test func aFlagOverridesItsEnvironmentVariable() throws {
        let settings = Settings(
            flags: [.bundleId: "com.flag.app", .environment: nil],
            environment: ["APPSTORE_BUNDLE_ID": "com.env.app", "APPSTORE_ENVIRONMENT": "Sandbox"]
        )
        #expect(try settings.bundleId() == "com.flag.app")
        #expect(try settings.environment() == .sandbox)
    }

    @Test func aMissingSettingNamesBothTheVariableAndTheFlag() {
        let settings = Settings(flags: [:], environment: [:])
        #expect(throws: ConfigurationError(setting: "DATABASE_URL (--database-url)", problem: "is not set")) {
            try settings.databaseURL()
        }
    }

    @Test(arguments: [
        ("APPSTORE_ENVIRONMENT", "staging"), ("APPSTORE_APP_APPLE_ID", "abc"), ("APPSTORE_APP_APPLE_ID", "-4"),
        ("DATABASE_URL", "mysql://x@y/z"), ("APPSTORE_BUNDLE_ID", "com.has space"),
    ])
    func aMalformedSettingIsAConfigurationErrorNamingIt(variable: String, value: String) {
        var environment = ["APPSTORE_ENVIRONMENT": "Production"]
        environment[variable] = value
        let settings = Settings(flags: [:], environment: environment)
        do {
            switch variable {
            case "APPSTORE_ENVIRONMENT": _ = try settings.environment()
            case "APPSTORE_APP_APPLE_ID": _ = try settings.appAppleId(for: .production)
            case "DATABASE_URL": _ = try settings.databaseURL()
            default: _ = try settings.bundleId()
            }
            Issue.record("\(variable)=\(value) was accepted")
        } catch let error as ConfigurationError {
            #expect(error.setting.hasPrefix(variable))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func theAppAppleIdIsRequiredInProductionOnly() throws {
        let settings = Settings(flags: [:], environment: [:])
        #expect(throws: ConfigurationError.self) { try settings.appAppleId(for: .production) }
        #expect(try settings.appAppleId(for: .sandbox) == nil)
    }

    @Test func aDatabasePasswordNeverAppearsInAConfigurationError() {
        let settings = Settings(flags: [:], environment: ["DATABASE_URL": "postgresql://u:TopSecret1@db/x?sslmode=sometimes"])
        do {
            _ = try settings.databaseURL()
            Issue.record("accepted an unknown sslmode")
        } catch {
            #expect(!"\(error)".contains("TopSecret1"))
        }
    }

    @Test func rootCertificatesThatCannotBeReadAreAConfigurationError() {
        let settings = Settings(
            flags: [:],
            environment: [
                "APPSTORE_ROOT_CERTIFICATES": "/nonexistent/AppleRootCA-G3.cer", "APPSTORE_BUNDLE_ID": "com.x",
                "APPSTORE_ENVIRONMENT": "Sandbox",
            ]
        )
        do {
            _ = try settings.verifierConfiguration()
            Issue.record("accepted a missing file")
        } catch let error as ConfigurationError {
            #expect(error.setting.hasPrefix("APPSTORE_ROOT_CERTIFICATES"))
            #expect(error.problem.contains("/nonexistent/AppleRootCA-G3.cer"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}

@Suite("What verify accepts as input")
struct PayloadInputTests {
    @Test func aBareJWSAWebhookBodyAndAHistoryItemAllYieldTheJWS() throws {
        #expect(try PayloadInspection.signedPayload(fromInput: "  a.b.c\n") == "a.b.c")
        #expect(try PayloadInspection.signedPayload(fromInput: "{\"signedPayload\":\"a.b.c\"}") == "a.b.c")
        #expect(try PayloadInspection.signedPayload(fromInput: "{\"sendAttempts\":[],\"signedPayload\":\"a.b.c\"}") == "a.b.c")
    }

    @Test func jsonWithoutASignedPayloadIsRefusedWithAReason() {
        #expect(throws: InspectionInputError.self) { try PayloadInspection.signedPayload(fromInput: "{\"payload\":1}") }
        #expect(throws: InspectionInputError.self) { try PayloadInspection.signedPayload(fromInput: "{not json") }
    }
}

// swift-tools-version:6.2
import PackageDescription

/// Every target builds in the Swift 6 language mode (strict concurrency) with the
/// upcoming features that keep imports explicit.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "appstore-reconcile",
    platforms: [.macOS(.v15)],
    // What a user would build or embed: the tool, its companion for trying it
    // (appstore-reconcile-dev: demo, simulate, throwaway-postgres), and the verifier and the API
    // client, each useful alone. The ledger, the passes, the CLI, the simulator and the throwaway
    // Postgres are targets of this package only (`package` access).
    products: [
        .executable(name: "appstore-reconcile", targets: ["AppStoreReconcile"]),
        .executable(name: "appstore-reconcile-dev", targets: ["AppStoreReconcileDev"]),
        .library(name: "SignedData", targets: ["SignedData"]),
        .library(name: "AppStoreServerAPI", targets: ["AppStoreServerAPI"]),
        .executable(name: "reconcile-benchmark", targets: ["ReconcileBenchmark"]),
    ],
    dependencies: [
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // Already in the graph through Hummingbird; named for NIOHTTPTypes (serve's connection guard).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0", traits: []),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/pointfreeco/swift-clocks.git", from: "1.1.1"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
    ],
    targets: [
        // Verifying Apple's signed data (JWS + x5c chain) and the decoded payload models.
        .target(
            name: "SignedData",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Atomics", package: "swift-atomics"),
            ],
            swiftSettings: strictSettings
        ),
        // App receipts (what apps sent to verifyReceipt), read with SwiftASN1 for the IDs they name:
        // the questions an import asks Apple. Nothing in them is trusted or stored.
        .target(
            name: "AppReceipt",
            dependencies: [.product(name: "SwiftASN1", package: "swift-asn1")],
            swiftSettings: strictSettings
        ),
        // The kinds of failure the libraries' errors carry and the command line maps to exit statuses.
        .target(name: "FailureKind", swiftSettings: strictSettings),
        // What the App Store Server API's requests and answers hold, as values: no HTTP client
        // (re-exported by AppStoreServerAPI).
        .target(
            name: "AppStoreServerModel",
            dependencies: ["SignedData"],
            swiftSettings: strictSettings
        ),
        // The App Store Server API client: JWT auth, paging, rate limits, retries.
        .target(
            name: "AppStoreServerAPI",
            dependencies: [
                "SignedData", "AppStoreServerModel", "FailureKind",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // NIOConnectionError: a request that never left (RepeatRule).
                .product(name: "NIOPosix", package: "swift-nio"),
                // The clock the rate limiter and the retries wait on (a test's own in tests).
                .product(name: "Clocks", package: "swift-clocks"),
            ],
            swiftSettings: strictSettings
        ),
        // The ledger's records and their columns, as values: no database (re-exported by Ledger).
        .target(
            name: "LedgerModel",
            dependencies: ["SignedData", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strictSettings
        ),
        // The deployment's configuration file (YAML): every app and the environments it is kept
        // in, read strictly. No database, no network.
        .target(
            name: "DeploymentConfiguration",
            dependencies: ["SignedData", "RevenueMetrics", .product(name: "Yams", package: "Yams")],
            swiftSettings: strictSettings
        ),
        // The Postgres ledger: migrations, reads and the apply path.
        .target(
            name: "Ledger",
            dependencies: [
                // Decisions: what a row owes (SubscriptionDue), stored with it by the one writer;
                // LifecycleEvents: the events of a change, written with it into the outbox.
                "LedgerModel", "SignedData", "FailureKind", "Decisions", "LifecycleEvents",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings,
            plugins: ["EmbedMigrations"]
        ),
        // The ledger's statements for a team's first day and its support desk: an import's
        // checkpoints (migration 0025: how far an input went, the accounts it imported, keyed by the
        // input's content) and what `customer` reads of one account; `prune`'s; the outbox's
        // publication, which `migrate` makes.
        .target(
            name: "LedgerSupport",
            dependencies: [
                "Ledger", "LedgerModel", "SignedData", "RevenueMetrics", "FailureKind",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // What the ledger is worth, as values: a metrics row, the choices its figures depend on
        // (interval, MRR convention, where refunds count), a product's duration, exchange rates for
        // a total. The figures themselves are app_store.metrics (migration 0031). Pure.
        .target(name: "RevenueMetrics", swiftSettings: strictSettings),
        // What happened to a subscription, for a team's other services (issue 66): lifecycle
        // events derived from the ledger's rows before and after a change, whoever wrote it. Pure.
        .target(name: "LifecycleEvents", dependencies: ["LedgerModel"], swiftSettings: strictSettings),
        // The decisions, pure: what to ask Apple, what to apply, which accounts to repair, which
        // window a nightly run covers, what to re-deliver. Values in, values out: no database, no
        // network (TargetBoundaryTests.aPureTargetImportsNoIO keeps it so).
        .target(
            name: "Decisions",
            dependencies: [
                "SignedData", "AppStoreServerModel", "LedgerModel", "FailureKind", "AppReceipt",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // The remedies' decisions, pure: who an outage hurt and the days each gets, Apple's rules
        // for an extension, the refund answer, the machines that record each call that changes
        // state at Apple before sending it, and what Apple's answers mean (AppleCallEnd).
        .target(
            name: "RemedyDecisions",
            dependencies: [
                "Decisions", "SignedData", "AppStoreServerModel", "LedgerModel",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // What a run found and did, as values: the passes fill them, the reports render them. No
        // database, no network, no rendering.
        .target(
            name: "RunResults",
            dependencies: ["Decisions", "RemedyDecisions", "LedgerModel", "SignedData", "AppStoreServerModel"],
            swiftSettings: strictSettings
        ),
        // The renderings of a run's result and of the ledger's figures: report.md/json/html, the
        // outage and deployment pages, the metrics files.
        .target(
            name: "Reports",
            dependencies: [
                "RunResults", "Decisions", "RemedyDecisions", "LedgerModel", "SignedData", "AppStoreServerModel", "RevenueMetrics",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSettings
        ),
        // Both passes (I/O) and the run service: they fill a run's result (RunResults) and
        // render nothing.
        .target(
            name: "Reconciliation",
            dependencies: [
                "SignedData", "AppStoreServerModel", "AppStoreServerAPI", "LedgerModel", "Ledger", "LedgerSupport", "Decisions", "RemedyDecisions", "FailureKind", "RunResults",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        // The composition root: the deployment's App Stores resolved once (flags over the
        // environment over the configuration file), the parts each pair's work is built from (its
        // verifier, its API client, the ledger's store), and one service that runs N ≥ 1 pairs.
        .target(
            name: "Deployment",
            dependencies: [
                "DeploymentConfiguration", "Reconciliation", "Reports", "Ledger", "LedgerModel", "AppStoreServerAPI", "SignedData", "FailureKind", "Decisions",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        // `serve`: its Hummingbird application (the routes Apple and the probes call, the bounds on
        // what a client can make it hold), the receiver behind them (batched writes, forwarding,
        // the refund-request deadline sweep), its metrics and its services.
        .target(
            name: "LiveReceiver",
            dependencies: [
                "Reconciliation", "Ledger", "Decisions", "SignedData", "RunResults", "Reports",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        // A private PostgreSQL cluster for tests and the demo.
        .target(
            name: "ThrowawayPostgres",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // Test PKI and a fake App Store Server API that follows Apple's documented behaviour.
        .target(
            name: "AppStoreSimulator",
            dependencies: [
                "SignedData",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // The thin command-line interface: the deployed tool's commands, and what the
        // companion's commands share with them (the exit statuses, logging).
        .target(
            name: "ReconcileCLI",
            dependencies: [
                "SignedData", "AppStoreServerAPI", "Ledger", "Decisions", "RemedyDecisions", "Reconciliation", "LiveReceiver", "FailureKind", "RunResults", "Reports",
                "DeploymentConfiguration", "Deployment", "LedgerSupport", "RevenueMetrics",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        // `appstore-reconcile`, the binary teams deploy: no simulator, no test PKI, no throwaway
        // PostgreSQL (CommandLineTests.theDeployedBinaryCarriesNoSimulatorNorThrowawayPostgres).
        .executableTarget(
            name: "AppStoreReconcile",
            dependencies: ["ReconcileCLI", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strictSettings
        ),
        // `appstore-reconcile-dev`: demo, simulate, throwaway-postgres.
        .executableTarget(
            name: "AppStoreReconcileDev",
            dependencies: [
                "ReconcileCLI", "SignedData", "AppStoreServerAPI", "Ledger", "Reconciliation", "Reports", "AppStoreSimulator", "ThrowawayPostgres", "Deployment",
                // The demo's own table of the team's facts (DemoRefundAnswers).
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        // Benchmarks: ratios measured in one run, never timed tests (see README, Performance).
        .executableTarget(
            name: "ReconcileBenchmark",
            dependencies: [
                "SignedData", "AppStoreSimulator", "Ledger", "Reconciliation", "Reports", "ThrowawayPostgres", "RawConnection",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Benchmarks/ReconcileBenchmark",
            exclude: [],
            swiftSettings: strictSettings
        ),
        // Build-time embedding of sql/*.sql into the Ledger target, so the binary is self-contained.
        .executableTarget(name: "MigrationEmbedder", path: "Plugins/MigrationEmbedder"),
        .plugin(name: "EmbedMigrations", capability: .buildTool(), dependencies: ["MigrationEmbedder"]),

        .testTarget(
            name: "SignedDataTests", dependencies: ["SignedData", "AppStoreSimulator", "AppStoreServerAPI", .product(name: "Crypto", package: "swift-crypto")],
            exclude: ["ApplePayloads"], swiftSettings: strictSettings
        ),
        // App receipts read without I/O; Apple's own Xcode test receipts are among the fixtures.
        .testTarget(name: "AppReceiptTests", dependencies: ["AppReceipt", "AppStoreSimulator"], exclude: ["AppleReceipts"], swiftSettings: strictSettings),
        // The pure decisions, tested without I/O: links neither PostgreSQL nor the simulator.
        .testTarget(name: "DecisionsTests", dependencies: ["LifecycleEvents", "RevenueMetrics", "Decisions", "RemedyDecisions", "LedgerModel", "SignedData", "AppStoreServerModel"], swiftSettings: strictSettings),
        // The configuration file, read without I/O: links neither PostgreSQL nor the simulator.
        // The ledger's records and columns as values: links neither PostgreSQL nor the simulator.
        .testTarget(name: "LedgerModelTests", dependencies: ["LedgerModel"], swiftSettings: strictSettings),
        .testTarget(name: "DeploymentConfigurationTests", dependencies: ["DeploymentConfiguration", "SignedData"], swiftSettings: strictSettings),
        .testTarget(name: "LedgerTests", dependencies: ["Ledger", "LedgerModel", "SignedData", "Decisions", "ThrowawayPostgres", "TestSupport", .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Crypto", package: "swift-crypto"), .product(name: "Logging", package: "swift-log")], swiftSettings: strictSettings),
        .testTarget(name: "ThrowawayPostgresTests", dependencies: ["ThrowawayPostgres", "TestSupport", "Ledger", .product(name: "PostgresNIO", package: "postgres-nio")], swiftSettings: strictSettings),
        .testTarget(
            name: "AppStoreServerAPITests",
            dependencies: [
                "AppStoreServerAPI", "AppStoreSimulator", "SignedData", .product(name: "Crypto", package: "swift-crypto"), .product(name: "Logging", package: "swift-log"),
                .product(name: "Clocks", package: "swift-clocks"), .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(name: "AppStoreSimulatorTests", dependencies: ["AppStoreSimulator", "AppReceipt", "AppStoreServerAPI", "SignedData", .product(name: "Crypto", package: "swift-crypto")], swiftSettings: strictSettings),
        .testTarget(name: "ReconciliationTests", dependencies: ["LifecycleEvents", "RevenueMetrics", "DeploymentConfiguration", "Deployment", "Reconciliation", "FailureKind", "Reports", "RunResults", "LiveReceiver", "Decisions", "RemedyDecisions", "TestSupport", "ThrowawayPostgres", "AppStoreSimulator", "AppStoreServerModel", "AppStoreServerAPI", "SignedData", "Ledger", "LedgerModel", "LedgerSupport", .product(name: "NIOCore", package: "swift-nio"), .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Logging", package: "swift-log")], swiftSettings: strictSettings),
        // serve's routes in process (HummingbirdTesting), against a real ledger.
        .testTarget(
            name: "LiveReceiverTests",
            dependencies: [
                "LiveReceiver", "Reconciliation", "Reports", "Decisions", "Ledger", "LedgerModel", "TestSupport", "AppStoreSimulator", "AppStoreServerAPI",
                "SignedData", "ThrowawayPostgres",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // The built binary end to end: run, nightly, repair, ingest, detect-outage, reliability, jobs/.
        .testTarget(
            name: "AppStoreReconcileTests",
            dependencies: [
                "TestSupport", "AppStoreSimulator", "AppStoreServerAPI", "SignedData", "ThrowawayPostgres", "Ledger", "Decisions", "Reconciliation", "Reports", "LiveReceiver", "ReconcileCLI", "FailureKind", "RawConnection", "Deployment", "LedgerSupport", "RevenueMetrics",
                .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // Shared by the test targets: a database per test, running the built binary, the recovery
        // harness (a simulated App Store and a seeded ledger).
        .target(
            name: "TestSupport",
            dependencies: [
                "Ledger", "ThrowawayPostgres", "Decisions", "Reconciliation", "Reports", "AppStoreSimulator", "AppStoreServerAPI", "SignedData",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: strictSettings
        ),
        // A plain TCP client driven as an attacker drives one, and what serve's process holds
        // meanwhile: for serve's limit tests and the benchmark's attacks (no Testing, no @testable).
        .target(name: "RawConnection", path: "Tests/RawConnection", swiftSettings: strictSettings),
    ]
)

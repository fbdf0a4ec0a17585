package import CoreMetrics
package import Prometheus

/// One set of metric families: swift-metrics' API (`Counter`, `Meter`, `Timer`) over
/// swift-prometheus's collectors in a registry of their own (no global bootstrap: a process may
/// hold several, tests too), each family with its HELP text. The exposition text is
/// swift-prometheus's (`text`).
package struct MetricFamilies: Sendable {
    package let registry = PrometheusCollectorRegistry()

    package init() {}

    private var factory: PrometheusMetricsFactory { PrometheusMetricsFactory(registry: registry) }

    private static func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// A counter: only goes up.
    package func counter(_ name: String, _ labels: [(String, String)], help: String) -> CoreMetrics.Counter {
        CoreMetrics.Counter(
            label: name, dimensions: labels, handler: registry.makeCounter(descriptor: Self.descriptor(name, help), labels: labels), factory: factory
        )
    }

    /// A gauge: set to a value.
    package func gauge(_ name: String, _ labels: [(String, String)], help: String) -> CoreMetrics.Meter {
        CoreMetrics.Meter(
            label: name, dimensions: labels, handler: registry.makeGauge(descriptor: Self.descriptor(name, help), labels: labels), factory: factory
        )
    }

    /// Sets a gauge once (a batch run's figures).
    package func set(_ name: String, _ labels: [(String, String)], _ value: Double, help: String) {
        gauge(name, labels, help: help).set(value)
    }

    /// A histogram of durations, in seconds, with these upper bounds.
    package func timer(_ name: String, buckets: [Duration], help: String) -> CoreMetrics.Timer {
        CoreMetrics.Timer(
            label: name, dimensions: [],
            handler: registry.makeDurationHistogram(descriptor: Self.descriptor(name, help), buckets: buckets), factory: factory
        )
    }

    /// The exposition text (Prometheus text format 0.0.4).
    package var text: String { registry.emitToString() }
}

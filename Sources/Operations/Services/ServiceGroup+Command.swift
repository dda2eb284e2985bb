import Logging
import ServiceLifecycle
import UnixSignals

extension ServiceGroup {
    /// The one group of a long-running command: its parts in start order, stopped in reverse on one of `signals`.
    ///
    /// A part that ends or fails stops the others gracefully, in order (the worker's fault after its drain), so the
    /// producer, listed first, still flushes what was decided. Each part is named by its type: the default name
    /// reflects the whole value (configuration included) into the group's debug lines, and costs milliseconds.
    public static func command(
        _ services: [any Service], signals: [UnixSignal] = [], logger: Logger
    ) -> ServiceGroup {
        ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services.map { service in
                    .init(
                        service: service, successTerminationBehavior: .gracefullyShutdownGroup,
                        failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: "\(type(of: service))")
                },
                gracefulShutdownSignals: signals, logger: logger))
    }
}

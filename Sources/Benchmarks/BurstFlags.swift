import ArgumentParser

/// The flags `bench notifications` and `bench rtdn` share: how the burst's gateway and workers are set up.
struct BurstFlags: ParsableArguments {
    @Option(help: "Workers (one consumer group, in this process).")
    var workers = 1

    @Option(name: .customLong("http-concurrency"), help: "POSTs in flight at the gateway.")
    var httpConcurrency = 32

    @Option(help: "Partitions of every topic.")
    var partitions = 4

    /// The burst these flags ask for, of `notifications` within `windowBytes`.
    func options(notifications: Int, windowBytes: Int) -> NotificationBurst.Options {
        var options = NotificationBurst.Options()
        options.notifications = notifications
        options.workers = workers
        options.httpConcurrency = httpConcurrency
        options.partitions = partitions
        options.windowBytes = windowBytes
        return options
    }
}

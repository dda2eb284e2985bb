import CRdKafka

/// The producer's calls on its handle.
extension RDKafkaClient {
    /// Hands one message to librdkafka with `rd_kafka_produceva` (copying key, value and headers).
    /// Returns nil on success: the delivery report callback then owns `opaque`.
    func produce(_ record: KafkaProducerRecord, opaque: UnsafeMutableRawPointer) -> KafkaError? {
        // Header names and values must stay valid during the call; librdkafka copies them.
        var allocations: [UnsafeMutableRawPointer] = []
        defer { allocations.forEach { $0.deallocate() } }
        var values: [rd_kafka_vu_t] = []
        values.reserveCapacity(6 + record.headers.count)
        for header in record.headers {
            let nameBytes = Array(header.name.utf8) + [0]
            let name = UnsafeMutableRawPointer.allocate(byteCount: nameBytes.count, alignment: 1)
            name.copyMemory(from: nameBytes, byteCount: nameBytes.count)
            allocations.append(name)
            var entry = rd_kafka_vu_t()
            entry.vtype = RD_KAFKA_VTYPE_HEADER
            entry.u.header.name = UnsafePointer(name.assumingMemoryBound(to: CChar.self))
            if let value = header.value {
                let bytes = UnsafeMutableRawPointer.allocate(byteCount: max(value.count, 1), alignment: 1)
                value.withUnsafeBytes {
                    bytes.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(bytes), byteCount: value.count)
                }
                allocations.append(bytes)
                entry.u.header.val = UnsafeRawPointer(bytes)
                entry.u.header.size = value.count
            }
            values.append(entry)
        }
        return record.topic.withCString { topic in
            withOptionalBytes(record.key) { key in
                withOptionalBytes(record.value) { value in
                    var entry = rd_kafka_vu_t()
                    entry.vtype = RD_KAFKA_VTYPE_TOPIC
                    entry.u.cstr = topic
                    values.append(entry)
                    if let partition = record.partition {
                        entry = rd_kafka_vu_t()
                        entry.vtype = RD_KAFKA_VTYPE_PARTITION
                        entry.u.i32 = partition
                        values.append(entry)
                    }
                    if let key {
                        entry = rd_kafka_vu_t()
                        entry.vtype = RD_KAFKA_VTYPE_KEY
                        entry.u.mem.ptr = UnsafeMutableRawPointer(mutating: key.baseAddress)
                        entry.u.mem.size = key.count
                        values.append(entry)
                    }
                    entry = rd_kafka_vu_t()
                    entry.vtype = RD_KAFKA_VTYPE_VALUE
                    entry.u.mem.ptr = value.flatMap { UnsafeMutableRawPointer(mutating: $0.baseAddress) }
                    entry.u.mem.size = value?.count ?? 0
                    values.append(entry)
                    entry = rd_kafka_vu_t()
                    entry.vtype = RD_KAFKA_VTYPE_MSGFLAGS
                    entry.u.i = RD_KAFKA_MSG_F_COPY
                    values.append(entry)
                    entry = rd_kafka_vu_t()
                    entry.vtype = RD_KAFKA_VTYPE_OPAQUE
                    entry.u.ptr = opaque
                    values.append(entry)
                    let error = values.withUnsafeBufferPointer { buffer in
                        withHandle { rd_kafka_produceva($0, buffer.baseAddress, buffer.count) }
                    }
                    return error.map { KafkaError(consuming: $0, context: "produce to \(record.topic)") }
                }
            }
        }
    }

    /// Blocks until every queued message was delivered or failed, or `timeoutMilliseconds` passed (`rd_kafka_flush`).
    func flush(timeoutMilliseconds: Int32) -> KafkaError? {
        withHandle { KafkaError.check(rd_kafka_flush($0, timeoutMilliseconds), context: "flush") }
    }

    /// Purges queued and in-flight messages (`rd_kafka_purge`; their sends fail with `purgedQueue`/`purgedInFlight`)
    /// and serves their delivery reports for up to 50 polls of 100 ms. Blocking.
    func purgeAndServeReports() {
        withHandle { rk in
            _ = rd_kafka_purge(rk, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
            // Purged messages get their delivery reports from the poll thread.
            var rounds = 0
            while rd_kafka_outq_len(rk) > 0 && rounds < 50 {
                _ = rd_kafka_poll(rk, 100)
                rounds += 1
            }
        }
    }
}

/// Calls `body` with the bytes (a non-nil, possibly empty buffer) or nil for a missing key/value.
private func withOptionalBytes<T>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> T) -> T {
    guard let bytes else { return body(nil) }
    return bytes.withUnsafeBytes { buffer in
        if buffer.baseAddress == nil {
            // An empty array may have no storage; give librdkafka a valid pointer with size 0 so an
            // empty value stays empty rather than becoming null.
            return withUnsafeBytes(of: UInt8(0)) { body(UnsafeRawBufferPointer(start: $0.baseAddress, count: 0)) }
        }
        return body(buffer)
    }
}

// librdkafka's public API and its mock cluster (used by `verify-worker dev-broker` and the tests).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

// Typed shims for variadic functions, which Swift cannot call. Prefixed `crdkafka_`, one per argument shape.

/// `rd_kafka_mock_broker_push_request_error_rtts` with one (error, response delay) tuple: the next request of
/// `api_key` to broker `broker_id` is answered `err` after `rtt_ms` milliseconds.
static inline rd_kafka_resp_err_t crdkafka_mock_broker_push_request_error_rtt(
    rd_kafka_mock_cluster_t *mcluster, int32_t broker_id, int16_t api_key, rd_kafka_resp_err_t err, int rtt_ms) {
    return rd_kafka_mock_broker_push_request_error_rtts(mcluster, broker_id, api_key, 1, err, rtt_ms);
}

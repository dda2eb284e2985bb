// librdkafka's public API and its mock cluster (used by `verify-worker dev-broker` and the tests).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

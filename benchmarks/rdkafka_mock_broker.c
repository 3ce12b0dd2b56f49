/*
 * A Kafka broker written in C to measure slog against: librdkafka's own mock
 * cluster (rdkafka_mock.h), one broker, run in this process.
 *
 *   rdkafka_mock_broker TOPIC=PARTITIONS [TOPIC=PARTITIONS ...]
 *
 * Creates each topic (replication factor 1), prints the bootstrap address on
 * one line, then serves until a line (or end of file) arrives on stdin.
 *
 * What it is: librdkafka's test broker, which speaks the protocol librdkafka
 * clients use (Produce, Fetch, ListOffsets, Metadata, ...) and keeps record
 * batches in memory (the last 5 MB or so of each partition; older ones are
 * dropped). No disk, no replication, no fsync: it is the cheapest
 * broker a librdkafka client can talk to on this machine, so a figure that the
 * client cannot reach against it is the client's (or the machine's) limit, not
 * the broker's. benchmarks/broker.py builds it like rdkafka_perf.c.
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *detail) {
    fprintf(stderr, "rdkafka_mock_broker: %s: %s\n", what, detail);
    exit(1);
}

int main(int argc, char **argv) {
    char err[512];
    if (argc < 2)
        die("usage", "rdkafka_mock_broker TOPIC=PARTITIONS [TOPIC=PARTITIONS ...]");
    /* The mock cluster lives inside a client handle; this one never connects. */
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err))
        die("config", err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        die("rd_kafka_new", err);
    rd_kafka_mock_cluster_t *cluster = rd_kafka_mock_cluster_new(rk, 1);
    if (!cluster)
        die("rd_kafka_mock_cluster_new", "failed");
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        int partitions = eq ? atoi(eq + 1) : 0;
        if (!eq || partitions < 1)
            die("topics are TOPIC=PARTITIONS", argv[i]);
        *eq = '\0';
        rd_kafka_resp_err_t failed = rd_kafka_mock_topic_create(cluster, argv[i], partitions, 1);
        if (failed)
            die(argv[i], rd_kafka_err2str(failed));
    }
    printf("%s\n", rd_kafka_mock_cluster_bootstraps(cluster));
    fflush(stdout);
    char line[64];
    (void)!fgets(line, sizeof line, stdin);
    rd_kafka_mock_cluster_destroy(cluster);
    rd_kafka_destroy(rk);
    return 0;
}

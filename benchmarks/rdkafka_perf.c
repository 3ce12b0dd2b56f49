/*
 * Minimal librdkafka throughput client for benchmarks/broker.py, in the spirit
 * of librdkafka's own examples/rdkafka_performance.c: it produces or consumes
 * N records and does nothing else per record, so the client is not what
 * limits the measurement (kcat formats and writes every record it consumes;
 * Python pays its interpreter per record).
 *
 *   rdkafka_perf produce BOOTSTRAP TOPIC PARTITIONS COUNT SIZE [key=value ...]
 *   rdkafka_perf txn-produce BOOTSTRAP TOPIC PARTITIONS COUNT SIZE PER_TXN [key=value ...]
 *   rdkafka_perf consume BOOTSTRAP TOPIC PARTITIONS COUNT [key=value ...]
 *
 * produce: COUNT records of SIZE bytes, record i to partition i % PARTITIONS,
 *          then flush; fails if any delivery report carries an error.
 * txn-produce: the same in transactions of PER_TXN records each (the last may
 *          be shorter), committed one after another (transactional.id must be
 *          given); init_transactions happens before the clock starts.
 * consume: assigns partitions 0..PARTITIONS-1 at offset 0 (no group
 *          protocol) and reads until COUNT records arrived; fails on a
 *          consumer error or when no record arrives for 30 s.
 * key=value pairs are librdkafka configuration properties. With RDKAFKA_PERF_BARRIER
 * set in the environment, produce and txn-produce print "ready" once set up
 * (after init_transactions) and start when a line arrives on stdin.
 * Prints "records=N bytes=B seconds=S librdkafka=VERSION" on success (seconds: from
 * the first record produced, or the assignment, to the last acknowledged or read;
 * produce and txn-produce add "started=T", when the clock started (CLOCK_MONOTONIC
 * seconds, so concurrent producers' spans can be combined);
 * txn-produce adds "transactions=T commit_seconds=C", the time spent in
 * rd_kafka_commit_transaction, which includes flushing the transaction's records).
 * Build: cc -O2 rdkafka_perf.c -lrdkafka (benchmarks/broker.py does this itself).
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long delivery_errors;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "rdkafka_perf: %s: %s\n", what, detail);
    exit(1);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque) {
    (void)rk;
    (void)opaque;
    if (msg->err && delivery_errors++ == 0)
        fprintf(stderr, "rdkafka_perf: delivery failed: %s\n", rd_kafka_err2str(msg->err));
}

static rd_kafka_conf_t *make_conf(const char *bootstrap, int argc, char **argv) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof err))
        die("config", err);
    for (int i = 0; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            die("config must be key=value", argv[i]);
        *eq = '\0';
        if (rd_kafka_conf_set(conf, argv[i], eq + 1, err, sizeof err))
            die("config", err);
    }
    return conf;
}

static void check(const char *what, rd_kafka_error_t *error) {
    if (error)
        die(what, rd_kafka_error_string(error));
}

/* per_txn 0: no transactions (plain or idempotent, as the configuration says). */
static int produce(const char *bootstrap, const char *topic, int partitions, long long count,
                   size_t size, long long per_txn, int argc, char **argv) {
    char err[512];
    rd_kafka_conf_t *conf = make_conf(bootstrap, argc, argv);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        die("producer", err);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    char *value = malloc(size);
    for (size_t i = 0; i < size; i++)
        value[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[i % 36];
    if (per_txn)
        check("init_transactions", rd_kafka_init_transactions(rk, 60000));
    if (getenv("RDKAFKA_PERF_BARRIER")) {
        /* Concurrent producers start together: say so, then wait for a line. */
        printf("ready\n");
        fflush(stdout);
        if (fgetc(stdin) == EOF)
            die("barrier", "stdin closed before the start");
    }
    long long transactions = 0;
    double committing = 0, started = now_s();
    for (long long i = 0; i < count; i++) {
        if (per_txn && i % per_txn == 0)
            check("begin_transaction", rd_kafka_begin_transaction(rk));
        /* flags 0: librdkafka neither copies nor frees the (shared) value. */
        while (rd_kafka_produce(rkt, (int32_t)(i % partitions), 0, value, size, NULL, 0,
                                NULL) == -1) {
            rd_kafka_resp_err_t e = rd_kafka_last_error();
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                die("produce", rd_kafka_err2str(e));
            rd_kafka_poll(rk, 1);
        }
        if (per_txn && (i % per_txn == per_txn - 1 || i == count - 1)) {
            double t = now_s();
            check("commit_transaction", rd_kafka_commit_transaction(rk, 60000));
            committing += now_s() - t;
            transactions++;
        }
    }
    while (rd_kafka_outq_len(rk) > 0)
        rd_kafka_flush(rk, 1000);
    double seconds = now_s() - started;
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    free(value);
    if (delivery_errors) {
        fprintf(stderr, "rdkafka_perf: %lld delivery errors\n", delivery_errors);
        return 1;
    }
    printf("records=%lld bytes=%lld seconds=%.6f", count, count * (long long)size, seconds);
    printf(" started=%.6f", started);
    if (per_txn)
        printf(" transactions=%lld commit_seconds=%.6f", transactions, committing);
    printf(" librdkafka=%s\n", rd_kafka_version_str());
    return 0;
}

static int consume(const char *bootstrap, const char *topic, int partitions, long long count,
                   int argc, char **argv) {
    char err[512];
    enum { BATCH = 10000 };
    static rd_kafka_message_t *msgs[BATCH];
    rd_kafka_conf_t *conf = make_conf(bootstrap, argc, argv);
    if (rd_kafka_conf_set(conf, "group.id", "rdkafka-perf", err, sizeof err) ||
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err))
        die("config", err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk)
        die("consumer", err);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(parts, topic, p)->offset = 0;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, parts);
    if (e)
        die("assign", rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(parts);
    double started = now_s();
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(rk);
    long long seen = 0, bytes = 0;
    time_t last = time(NULL);
    while (seen < count) {
        ssize_t n = rd_kafka_consume_batch_queue(queue, 200, msgs, BATCH);
        if (n < 0)
            die("consume", rd_kafka_err2str(rd_kafka_last_error()));
        for (ssize_t i = 0; i < n; i++) {
            if (msgs[i]->err) {
                if (msgs[i]->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                    die("consume", rd_kafka_message_errstr(msgs[i]));
            } else {
                seen++;
                bytes += (long long)msgs[i]->len;
            }
            rd_kafka_message_destroy(msgs[i]);
        }
        if (n > 0)
            last = time(NULL);
        else if (time(NULL) - last > 30)
            die("consume", "no record for 30 s");
    }
    double seconds = now_s() - started;
    rd_kafka_queue_destroy(queue);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    if (seen != count) {
        fprintf(stderr, "rdkafka_perf: read %lld records, expected %lld\n", seen, count);
        return 1;
    }
    printf("records=%lld bytes=%lld seconds=%.6f librdkafka=%s\n", seen, bytes, seconds,
           rd_kafka_version_str());
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 7 && !strcmp(argv[1], "produce"))
        return produce(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]),
                       (size_t)atoll(argv[6]), 0, argc - 7, argv + 7);
    if (argc >= 8 && !strcmp(argv[1], "txn-produce") && atoll(argv[7]) > 0)
        return produce(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]),
                       (size_t)atoll(argv[6]), atoll(argv[7]), argc - 8, argv + 8);
    if (argc >= 6 && !strcmp(argv[1], "consume"))
        return consume(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]), argc - 6, argv + 6);
    fprintf(stderr, "usage: rdkafka_perf produce BOOTSTRAP TOPIC PARTITIONS COUNT SIZE "
                    "[key=value ...]\n       rdkafka_perf txn-produce BOOTSTRAP TOPIC "
                    "PARTITIONS COUNT SIZE PER_TXN [key=value ...]\n       rdkafka_perf consume BOOTSTRAP TOPIC PARTITIONS "
                    "COUNT [key=value ...]\n");
    return 2;
}

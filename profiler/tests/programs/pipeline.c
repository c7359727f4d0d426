/*
 * Known answer, class "pipeline": idle consumers wait on a condition variable for a producer,
 * which waits on another for a supplier busy on a CPU.
 *
 *   supplier --parts--> producer --items--> consumer-1..N   (bounded queues, condvars)
 *
 * True cause: the supplier's CPU work (supplier_compute, --supplier-us per part, times
 * --true-scale). Naive answer: the consumers' condvar wait (consumer_wait_for_item), the site
 * with the most wait time; its cost knob is the consumers' own work per item (consumer_process,
 * --consumer-us, times --naive-scale), what a user who believes the consumers are slow would
 * speed up. Throughput: items consumed per second.
 */
#include "known.h"

#define QUEUE_CAPACITY 4

struct queue {
    pthread_mutex_t mutex;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    int count;
};

#define QUEUE_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 }
static struct queue parts = QUEUE_INIT;
static struct queue items = QUEUE_INIT;
static uint64_t supplier_iterations, producer_iterations, consumer_iterations;

/* Puts one unit into q, waiting while it is full; 0 once the program stops. */
static NOINLINE int queue_put(struct queue *q)
{
    pthread_mutex_lock(&q->mutex);
    while (q->count >= QUEUE_CAPACITY && !atomic_load(&known_stop))
        pthread_cond_wait(&q->not_full, &q->mutex);
    int ok = !atomic_load(&known_stop);
    if (ok) {
        q->count++;
        pthread_cond_signal(&q->not_empty);
    }
    pthread_mutex_unlock(&q->mutex);
    return ok;
}

/* Takes one unit from q, waiting while it is empty; 0 once the program stops. */
static NOINLINE int queue_get(struct queue *q)
{
    pthread_mutex_lock(&q->mutex);
    while (q->count == 0 && !atomic_load(&known_stop))
        pthread_cond_wait(&q->not_empty, &q->mutex);
    int ok = !atomic_load(&known_stop);
    if (ok) {
        q->count--;
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->mutex);
    return ok;
}

static NOINLINE void supplier_compute(void)
{
    known_spin(supplier_iterations);
}

static NOINLINE int supplier_deliver(void)
{
    int ok = queue_put(&parts);
    KEEP_FRAME();
    return ok;
}

static NOINLINE void *supplier_thread(void *arg)
{
    (void)arg;
    do
        supplier_compute();
    while (supplier_deliver());
    return NULL;
}

static NOINLINE int producer_wait_for_part(void)
{
    int ok = queue_get(&parts);
    KEEP_FRAME();
    return ok;
}

static NOINLINE void producer_assemble(void)
{
    known_spin(producer_iterations);
}

static NOINLINE int producer_ship(void)
{
    int ok = queue_put(&items);
    KEEP_FRAME();
    return ok;
}

static NOINLINE void *producer_thread(void *arg)
{
    (void)arg;
    while (producer_wait_for_part()) {
        producer_assemble();
        if (!producer_ship())
            break;
    }
    return NULL;
}

static NOINLINE int consumer_wait_for_item(void)
{
    int ok = queue_get(&items);
    KEEP_FRAME();
    return ok;
}

static NOINLINE void consumer_process(void)
{
    known_spin(consumer_iterations);
}

static NOINLINE void *consumer_thread(void *arg)
{
    (void)arg;
    while (consumer_wait_for_item()) {
        consumer_process();
        known_unit_done();
    }
    return NULL;
}

static void wake_all(struct queue *q)
{
    pthread_mutex_lock(&q->mutex);
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mutex);
}

int main(int argc, char **argv)
{
    double supplier_us = 1000, producer_us = 50, consumer_us = 100, consumers = 4;
    struct known_option options[] = {
        { "supplier-us", &supplier_us, "the supplier's CPU time per part, in microseconds" },
        { "producer-us", &producer_us, "the producer's CPU time per item" },
        { "consumer-us", &consumer_us, "each consumer's CPU time per item" },
        { "consumers", &consumers, "consumer threads" },
    };
    struct known_settings s = known_parse(argc, argv, options, KNOWN_COUNT(options));
    known_calibrate();
    supplier_iterations = known_iterations(supplier_us * s.true_scale);
    producer_iterations = known_iterations(producer_us);
    consumer_iterations = known_iterations(consumer_us * s.naive_scale);
    int n = (int)consumers;
    if (n < 1 || n > 64) {
        fprintf(stderr, "pipeline: --consumers must be 1..64\n");
        return 2;
    }
    fprintf(stderr,
            "pipeline: supplier %.0f us, producer %.0f us, %d consumers %.0f us per item, %.1f s "
            "(%.0f iterations/us)\n",
            supplier_us * s.true_scale, producer_us, n, consumer_us * s.naive_scale, s.duration_s,
            known_iterations_per_us);

    pthread_t supplier, producer, consumer[64];
    struct known_window window = known_window_open();
    known_start(&supplier, supplier_thread, NULL, "supplier");
    known_start(&producer, producer_thread, NULL, "producer");
    known_start_group(consumer, n, consumer_thread, "consumer");
    known_window_close(&window, s.duration_s);
    wake_all(&parts);
    wake_all(&items);
    known_join_group(&supplier, 1);
    known_join_group(&producer, 1);
    known_join_group(consumer, n);
    known_report(&window);
    return 0;
}

/*
 * Known answer, class "two locks": a dozen background threads sleep while holding one mutex
 * (the most-waited lock, off the request path) beside a few request threads doing short CPU work
 * under another mutex (saturated, on the request path).
 *
 * True cause: the request mutex's critical section (request_critical_section, --request-us of
 * CPU, times --true-scale). Naive answer: the background mutex, where most of the wait time is
 * (background_take_lock); its cost knob is its hold time (background_sleep_under_lock,
 * --background-us of nanosleep, times --naive-scale). Throughput: requests per second.
 */
#include "known.h"

static pthread_mutex_t background_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t request_mutex = PTHREAD_MUTEX_INITIALIZER;
static uint64_t prepare_iterations, critical_iterations;
static double background_hold_us, background_rest_us;

static NOINLINE void background_take_lock(void)
{
    pthread_mutex_lock(&background_mutex);
    KEEP_FRAME();
}

static NOINLINE void background_sleep_under_lock(void)
{
    known_sleep_us(background_hold_us);
}

static NOINLINE void background_rest(void)
{
    known_sleep_us(background_rest_us);
}

static NOINLINE void *background_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&known_stop)) {
        background_take_lock();
        background_sleep_under_lock();
        pthread_mutex_unlock(&background_mutex);
        background_rest();
    }
    return NULL;
}

static NOINLINE void request_prepare(void)
{
    known_spin(prepare_iterations);
}

static NOINLINE void request_take_lock(void)
{
    pthread_mutex_lock(&request_mutex);
    KEEP_FRAME();
}

static NOINLINE void request_critical_section(void)
{
    known_spin(critical_iterations);
}

static NOINLINE void *request_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&known_stop)) {
        request_prepare();
        request_take_lock();
        request_critical_section();
        pthread_mutex_unlock(&request_mutex);
        known_unit_done();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double request_us = 1000, prepare_us = 20, background_us = 2000, rest_us = 100;
    double request_threads = 3, background_threads = 12;
    struct known_option options[] = {
        { "request-us", &request_us, "CPU time under the request mutex, in microseconds" },
        { "prepare-us", &prepare_us, "a request's CPU time outside the lock" },
        { "background-us", &background_us, "sleep under the background mutex" },
        { "rest-us", &rest_us, "a background thread's sleep between two holds" },
        { "request-threads", &request_threads, "request threads" },
        { "background-threads", &background_threads, "background threads" },
    };
    struct known_settings s = known_parse(argc, argv, options, KNOWN_COUNT(options));
    known_calibrate();
    prepare_iterations = known_iterations(prepare_us);
    critical_iterations = known_iterations(request_us * s.true_scale);
    background_hold_us = background_us * s.naive_scale;
    background_rest_us = rest_us;
    int nr = (int)request_threads, nb = (int)background_threads;
    if (nr < 1 || nr > 64 || nb < 0 || nb > 64) {
        fprintf(stderr, "two_locks: --request-threads 1..64, --background-threads 0..64\n");
        return 2;
    }
    fprintf(stderr,
            "two_locks: %d request threads (%.0f us CPU, then %.0f us CPU under their mutex), "
            "%d background threads (%.0f us asleep under theirs, %.0f us between), %.1f s\n",
            nr, prepare_us, request_us * s.true_scale, nb, background_hold_us, rest_us,
            s.duration_s);

    pthread_t request[64], background[64];
    struct known_window window = known_window_open();
    known_start_group(background, nb, background_thread, "background");
    known_start_group(request, nr, request_thread, "request");
    known_window_close(&window, s.duration_s);
    known_join_group(background, nb);
    known_join_group(request, nr);
    known_report(&window);
    return 0;
}

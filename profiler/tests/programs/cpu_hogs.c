/*
 * Known answer, class "CPU hogs that preempt lock holders": more runnable threads than CPUs.
 * Hog threads spin; request threads compute, then take one mutex for a short critical section,
 * and the scheduler preempts some holders inside it, so the other request threads block on the
 * mutex until the holder gets a CPU again.
 *
 * True cause: CPU saturation by the hogs (hog_spin; their number is --hogs times --true-scale,
 * rounded). Naive answer: the mutex wait (request_take_lock), the only wait of the request
 * threads; its cost knob is the critical section (request_critical_section, --critical-us of
 * CPU, times --naive-scale). Throughput: requests per second.
 */
#include "known.h"

static pthread_mutex_t request_mutex = PTHREAD_MUTEX_INITIALIZER;
static uint64_t compute_iterations, critical_iterations, hog_iterations;

static NOINLINE void hog_spin(void)
{
    known_spin(hog_iterations);
}

static NOINLINE void *hog_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&known_stop))
        hog_spin();
    return NULL;
}

static NOINLINE void request_compute(void)
{
    known_spin(compute_iterations);
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
        request_compute();
        request_take_lock();
        request_critical_section();
        pthread_mutex_unlock(&request_mutex);
        known_unit_done();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double hogs = 12, request_threads = 3, compute_us = 500, critical_us = 10;
    struct known_option options[] = {
        { "hogs", &hogs, "spinning threads (times --true-scale)" },
        { "request-threads", &request_threads, "request threads" },
        { "compute-us", &compute_us, "a request's CPU time outside the lock, microseconds" },
        { "critical-us", &critical_us, "a request's CPU time under the lock" },
    };
    struct known_settings s = known_parse(argc, argv, options, KNOWN_COUNT(options));
    known_calibrate();
    compute_iterations = known_iterations(compute_us);
    critical_iterations = known_iterations(critical_us * s.naive_scale);
    hog_iterations = known_iterations(100);
    int nh = (int)(hogs * s.true_scale + 0.5), nr = (int)request_threads;
    if (nh < 0 || nh > 64 || nr < 1 || nr > 64) {
        fprintf(stderr, "cpu_hogs: --hogs 0..64 (after scaling), --request-threads 1..64\n");
        return 2;
    }
    fprintf(stderr,
            "cpu_hogs: %d hogs, %d request threads (%.0f us CPU, then %.0f us CPU under one "
            "mutex), %.1f s\n",
            nh, nr, compute_us, critical_us * s.naive_scale, s.duration_s);

    pthread_t hog[64], request[64];
    struct known_window window = known_window_open();
    known_start_group(request, nr, request_thread, "request");
    known_start_group(hog, nh, hog_thread, "hog");
    known_window_close(&window, s.duration_s);
    known_join_group(hog, nh);
    known_join_group(request, nr);
    known_report(&window);
    return 0;
}

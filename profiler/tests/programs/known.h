/*
 * Shared by lockscope's known-answer programs (the C files beside it): the command line,
 * CPU work calibrated in microseconds of the thread's own CPU time, thread names and the
 * throughput line the tests parse.
 *
 * Every program takes
 *   --duration SECONDS   how long it runs (default 2)
 *   --true-scale X       factor on the cost of its true cause (default 1)
 *   --naive-scale X      factor on the cost of its naive answer (default 1)
 * plus its own knobs, and prints one line on stdout at the end:
 *   throughput: N units/s (U units in S s)
 * Its settings go to stderr at the start.
 *
 * Built like most distribution software: cc -O2 -fomit-frame-pointer -pthread (no frame
 * pointers: complete stacks come from the profiler's own unwinder).
 */
#ifndef LOCKSCOPE_KNOWN_H
#define LOCKSCOPE_KNOWN_H

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define KNOWN_COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

/* Follows a call that would otherwise be a tail call (a jump, leaving no frame of its caller on
 * the stack): the named functions must all appear in the stacks. */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

/* One option of a program: --name VALUE sets *value (a double). */
struct known_option {
    const char *name;
    double *value;
    const char *help;
};

static void known_usage(const char *program, const struct known_option *options, int n)
{
    fprintf(stderr, "usage: %s [--duration S] [--true-scale X] [--naive-scale X]", program);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " [--%s N]", options[i].name);
    fputc('\n', stderr);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "  --%s: %s (default %g)\n", options[i].name, options[i].help,
                *options[i].value);
    exit(2);
}

/* The three common settings, then the program's own options. */
struct known_settings {
    double duration_s;
    double true_scale;
    double naive_scale;
};

static struct known_settings known_parse(int argc, char **argv, const struct known_option *options,
                                         int n)
{
    struct known_settings s = { 2.0, 1.0, 1.0 };
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0 || i + 1 >= argc)
            known_usage(argv[0], options, n);
        const char *name = arg + 2;
        char *end;
        double v = strtod(argv[++i], &end);
        if (*end != '\0' || v < 0)
            known_usage(argv[0], options, n);
        if (strcmp(name, "duration") == 0)
            s.duration_s = v;
        else if (strcmp(name, "true-scale") == 0)
            s.true_scale = v;
        else if (strcmp(name, "naive-scale") == 0)
            s.naive_scale = v;
        else {
            int found = 0;
            for (int k = 0; k < n; k++) {
                if (strcmp(name, options[k].name) == 0) {
                    *options[k].value = v;
                    found = 1;
                }
            }
            if (!found)
                known_usage(argv[0], options, n);
        }
    }
    if (s.duration_s <= 0)
        known_usage(argv[0], options, n);
    return s;
}

static double known_now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Work that the optimizer cannot remove: a multiply-xorshift chain whose result is kept. */
static _Atomic uint64_t known_sink;

#define KNOWN_MIX(x) ((x) = ((x) ^ ((x) >> 29)) * 0xbf58476d1ce4e5b9ULL + 0x9e3779b97f4a7c15ULL)

/* Iterations of KNOWN_MIX per microsecond of CPU time, set by known_calibrate. */
static double known_iterations_per_us = 100.0;

/* Runs `iterations` rounds of the mix in the calling function's own frame (always inlined, so a
 * CPU sample's leaf is the named function that asked for the work). */
static inline __attribute__((always_inline)) void known_spin(uint64_t iterations)
{
    uint64_t x = iterations | 1;
    for (uint64_t i = 0; i < iterations; i++)
        KNOWN_MIX(x);
    atomic_fetch_add_explicit(&known_sink, x, memory_order_relaxed);
}

/* The iterations that take `us` microseconds of CPU time. */
static inline uint64_t known_iterations(double us)
{
    return (uint64_t)(us * known_iterations_per_us + 0.5);
}

/* Measures the mix's speed on this CPU by the thread's own CPU clock (preemption does not
 * count), the best of five 10 ms rounds. */
static NOINLINE void known_calibrate(void)
{
    uint64_t n = 1000;
    double best = 0;
    for (int round = 0; round < 5;) {
        double t0 = known_now(CLOCK_THREAD_CPUTIME_ID);
        known_spin(n);
        double dt = known_now(CLOCK_THREAD_CPUTIME_ID) - t0;
        if (dt < 0.01) {
            n *= 2;
            continue;
        }
        double rate = n / (dt * 1e6);
        if (rate > best)
            best = rate;
        round++;
    }
    known_iterations_per_us = best;
}

/* Sleeps `us` microseconds of wall time (nanosleep, restarted after a signal). */
static inline void known_sleep_us(double us)
{
    long long ns = (long long)(us * 1e3);
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* What a thread runs, and its name. */
struct known_thread {
    void *(*fn)(void *);
    void *arg;
    char name[16];
};

/* Names the thread before it does anything (so that every event of it carries its role's name:
 * reports read well and --threads can select a role), then runs its function. */
static NOINLINE void *known_thread_main(void *p)
{
    struct known_thread *t = p;
    pthread_setname_np(pthread_self(), t->name);
    return t->fn(t->arg);
}

/* Starts thread `name` (at most 15 characters) running fn(arg). */
static void known_start(pthread_t *thread, void *(*fn)(void *), void *arg, const char *name)
{
    struct known_thread *t = calloc(1, sizeof *t);
    if (!t) {
        perror("calloc");
        exit(1);
    }
    t->fn = fn;
    t->arg = arg;
    snprintf(t->name, sizeof t->name, "%s", name);
    int rc = pthread_create(thread, NULL, known_thread_main, t);
    if (rc != 0) {
        fprintf(stderr, "pthread_create %s: %s\n", name, strerror(rc));
        exit(1);
    }
}

/* Starts n threads named prefix-1 .. prefix-n running fn(NULL). */
static void known_start_group(pthread_t *threads, int n, void *(*fn)(void *), const char *prefix)
{
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "%s-%d", prefix, i + 1);
        known_start(&threads[i], fn, NULL, name);
    }
}

static void known_join_group(pthread_t *threads, int n)
{
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
}

/* Set when the measured window ends: every thread's loop stops at it. */
static atomic_int known_stop;
/* The work units done (what the throughput counts). */
static atomic_ulong known_units;

static inline void known_unit_done(void)
{
    atomic_fetch_add_explicit(&known_units, 1, memory_order_relaxed);
}

/* The measured window: it opens before the threads start and closes after `duration_s`. */
struct known_window {
    double start, seconds;
    uint64_t units;
};

static struct known_window known_window_open(void)
{
    struct known_window w = { known_now(CLOCK_MONOTONIC), 0, 0 };
    return w;
}

/* Sleeps out the window, then stops the threads and counts the units done in it. */
static void known_window_close(struct known_window *w, double duration_s)
{
    double left = w->start + duration_s - known_now(CLOCK_MONOTONIC);
    if (left > 0)
        known_sleep_us(left * 1e6);
    atomic_store(&known_stop, 1);
    w->units = atomic_load(&known_units);
    w->seconds = known_now(CLOCK_MONOTONIC) - w->start;
}

static void known_report(const struct known_window *w)
{
    printf("throughput: %.1f units/s (%llu units in %.3f s)\n", w->units / w->seconds,
           (unsigned long long)w->units, w->seconds);
    fflush(stdout);
}

#endif

/*
 * Known answer, class "a sleep or I/O inside a critical section": request threads take one mutex
 * and, holding it, update some state (CPU) and write a journal record, which sleeps
 * (nanosleep, by default) or does file I/O (pwrite and fdatasync, with --fsyncs N, of a
 * journal file created in the current directory and unlinked at once: run it on a disk, since
 * on a tmpfs fdatasync costs nothing).
 *
 * True cause: the sleep or I/O under the lock (journal_write_under_lock: --journal-us of
 * nanosleep times --true-scale, or N fdatasyncs times --true-scale, at least one). Naive answer:
 * the mutex's "contention", the CPU work under it (request_update_under_lock, --update-us times
 * --naive-scale). Throughput: requests per second.
 */
#include "known.h"

#include <fcntl.h>
#include <unistd.h>

static pthread_mutex_t journal_mutex = PTHREAD_MUTEX_INITIALIZER;
static uint64_t prepare_iterations, update_iterations;
static double journal_sleep_us;
static int journal_fd = -1, journal_fsyncs;
static off_t journal_offset;

static NOINLINE void request_prepare(void)
{
    known_spin(prepare_iterations);
}

static NOINLINE void request_take_lock(void)
{
    pthread_mutex_lock(&journal_mutex);
    KEEP_FRAME();
}

static NOINLINE void request_update_under_lock(void)
{
    known_spin(update_iterations);
}

/* Appends a 4 KiB record and makes it durable, or sleeps as long as a slow disk would. */
static NOINLINE void journal_write_under_lock(void)
{
    if (journal_fd < 0) {
        known_sleep_us(journal_sleep_us);
        return;
    }
    static char record[4096];
    for (int i = 0; i < journal_fsyncs; i++) {
        memset(record, (int)(journal_offset >> 12), sizeof record);
        if (pwrite(journal_fd, record, sizeof record, journal_offset) != (ssize_t)sizeof record ||
            fdatasync(journal_fd) != 0) {
            perror("journal write");
            exit(1);
        }
        /* A journal of 1 MiB, rewritten in a ring: the file does not grow. */
        journal_offset = (journal_offset + (off_t)sizeof record) % (1 << 20);
    }
}

static NOINLINE void request_critical_section(void)
{
    request_update_under_lock();
    journal_write_under_lock();
    KEEP_FRAME();
}

static NOINLINE void *request_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&known_stop)) {
        request_prepare();
        request_take_lock();
        request_critical_section();
        pthread_mutex_unlock(&journal_mutex);
        known_unit_done();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double journal_us = 2000, update_us = 50, prepare_us = 20, threads = 4, fsyncs = 0;
    struct known_option options[] = {
        { "journal-us", &journal_us, "the journal write's sleep under the lock, microseconds" },
        { "fsyncs", &fsyncs, "fdatasyncs of a temporary file per journal write instead (0: sleep)" },
        { "update-us", &update_us, "CPU time under the lock" },
        { "prepare-us", &prepare_us, "a request's CPU time outside the lock" },
        { "threads", &threads, "request threads" },
    };
    struct known_settings s = known_parse(argc, argv, options, KNOWN_COUNT(options));
    known_calibrate();
    prepare_iterations = known_iterations(prepare_us);
    update_iterations = known_iterations(update_us * s.naive_scale);
    journal_sleep_us = journal_us * s.true_scale;
    int n = (int)threads;
    if (n < 1 || n > 64) {
        fprintf(stderr, "sleep_under_lock: --threads must be 1..64\n");
        return 2;
    }
    char journal_path[] = "lockscope-journal.XXXXXX";
    if (fsyncs > 0) {
        journal_fsyncs = (int)(fsyncs * s.true_scale + 0.5);
        if (journal_fsyncs < 1)
            journal_fsyncs = 1;
        journal_fd = mkstemp(journal_path);
        if (journal_fd < 0) {
            perror("mkstemp");
            return 1;
        }
        unlink(journal_path);
        fprintf(stderr,
                "sleep_under_lock: %d request threads (%.0f us CPU, then %.0f us CPU and %d "
                "fdatasyncs under one mutex), %.1f s\n",
                n, prepare_us, update_us * s.naive_scale, journal_fsyncs, s.duration_s);
    } else {
        fprintf(stderr,
                "sleep_under_lock: %d request threads (%.0f us CPU, then %.0f us CPU and %.0f us "
                "asleep under one mutex), %.1f s\n",
                n, prepare_us, update_us * s.naive_scale, journal_sleep_us, s.duration_s);
    }

    pthread_t request[64];
    struct known_window window = known_window_open();
    known_start_group(request, n, request_thread, "request");
    known_window_close(&window, s.duration_s);
    known_join_group(request, n);
    known_report(&window);
    return 0;
}

/*
 * Known answer, kernel difference "EEVDF replaces CFS" (Linux 6.6): spinner threads, all pinned
 * to one CPU, compute without ever sleeping, so each runs only while the others wait in the
 * run queue, preempted. How long one waits each time is the scheduler's slice, which the kernel
 * enforces at its tick (4 ms: Debian builds with HZ=250).
 *
 * True cause: under CFS (5.10, 6.1) the running thread is preempted once it has run its share of
 * the scheduling period, sched_latency (6 ms x (1 + log2 of the CPUs, at most 8): 12 ms with 2
 * CPUs) split among the runnable threads: 6 ms with two spinners, seen at the second tick, so a
 * spinner runs about 8 ms and the other waits as long. Under EEVDF (6.12) it is preempted once it
 * has run its request, the base slice (0.7 ms x the same factor: 1.4 ms), seen at the first tick:
 * a spinner runs one tick and the other waits one tick. Both kernels give each spinner half the
 * CPU; EEVDF preempts it about twice as often, each wait about half as long. Naive answer: the
 * spinners share a CPU the same way on every kernel (their CPU time and their time waiting for
 * the CPU are the same).
 *
 * The program proves it by the kernel's own counts, per spinner: its involuntary context
 * switches (preemptions) from getrusage(RUSAGE_THREAD) and its time waiting in the run queue
 * from /proc/thread-self/schedstat (the second field, run_delay; 0 when the kernel keeps no
 * scheduler statistics), and the ticks its CPU took (the LOC line of /proc/interrupts): under
 * emulation ticks come late and some not at all (about 300 of a nominal 500 in 2 s), so the
 * preemptions per tick tell the two rules apart better than per second: about 0.5 under CFS,
 * up to 1 under EEVDF. Throughput: rounds of work (a fixed number of iterations, about 10 us
 * on the host) per second, all spinners. Lines on stdout:
 *   spinner-N: P preemptions (R/s), W ms waiting for the CPU (M ms per preemption), U rounds
 *   preemptions: R/s per spinner, M ms waiting per preemption, K per tick (T ticks)
 *   throughput: ...
 */
#include "known.h"

#include <sched.h>
#include <sys/resource.h>

#define MAX_SPINNERS 8

static double spinners_n = 2, cpu = 0;

/* One spinner's numbers over the window. */
struct spinner_stats {
    uint64_t preemptions, rounds;
    double run_delay_ms;
};
static struct spinner_stats stats[MAX_SPINNERS];

/* The calling thread's time waiting in a run queue so far, milliseconds (0 without schedstat). */
static double run_delay_ms(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    unsigned long long on_cpu = 0, waiting = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &on_cpu, &waiting) != 2)
        waiting = 0;
    fclose(f);
    return waiting / 1e6;
}

/* The local timer interrupts (the scheduler's ticks) CPU n has taken so far: its column of the
 * LOC line of /proc/interrupts (x86), 0 when there is none. */
static unsigned long long ticks_of_cpu(int n)
{
    FILE *f = fopen("/proc/interrupts", "r");
    char line[4096];
    unsigned long long ticks = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ')
            p++;
        if (strncmp(p, "LOC:", 4) != 0)
            continue;
        p += 4;
        for (int i = 0; i <= n; i++)
            ticks = strtoull(p, &p, 10);
        break;
    }
    fclose(f);
    return ticks;
}

static void pin_to_cpu(int n)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(n, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(1);
    }
}

/* A round of work: iterations of the mix, in this frame. */
static NOINLINE void compute(uint64_t iterations)
{
    known_spin(iterations);
    KEEP_FRAME();
}

static NOINLINE void *spinner(void *arg)
{
    int me = (int)(intptr_t)arg;
    pin_to_cpu((int)cpu);
    struct spinner_stats *s = &stats[me];
    struct rusage start, end;
    getrusage(RUSAGE_THREAD, &start);
    double waited = run_delay_ms();
    /* A fixed count, not a calibrated time: under emulation the speed of a loop changes as it
     * runs, and only the scheduler's counts matter here. */
    uint64_t rounds = 0;
    while (!atomic_load_explicit(&known_stop, memory_order_relaxed)) {
        compute(1000);
        rounds++;
    }
    getrusage(RUSAGE_THREAD, &end);
    s->run_delay_ms = run_delay_ms() - waited;
    s->preemptions = (uint64_t)(end.ru_nivcsw - start.ru_nivcsw);
    s->rounds = rounds;
    atomic_fetch_add(&known_units, rounds);
    return NULL;
}

int main(int argc, char **argv)
{
    struct known_option options[] = {
        { "spinners", &spinners_n, "threads computing on the one CPU" },
        { "cpu", &cpu, "the CPU they are pinned to" },
    };
    struct known_settings s = known_parse(argc, argv, options, KNOWN_COUNT(options));
    int n = (int)spinners_n;
    if (n < 2 || n > MAX_SPINNERS) {
        fprintf(stderr, "preempt_slice: --spinners 2..%d\n", MAX_SPINNERS);
        return 2;
    }
    fprintf(stderr, "preempt_slice: %d spinners on CPU %d, %g s\n", n, (int)cpu, s.duration_s);
    pthread_t threads[MAX_SPINNERS];
    unsigned long long ticks = ticks_of_cpu((int)cpu);
    struct known_window w = known_window_open();
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "spinner-%d", i + 1);
        known_start(&threads[i], spinner, (void *)(intptr_t)i, name);
    }
    known_window_close(&w, s.duration_s);
    known_join_group(threads, n);
    ticks = ticks_of_cpu((int)cpu) - ticks;
    w.units = atomic_load(&known_units);
    uint64_t preemptions = 0;
    double waited = 0;
    for (int i = 0; i < n; i++) {
        struct spinner_stats *p = &stats[i];
        printf("spinner-%d: %llu preemptions (%.1f/s), %.1f ms waiting for the CPU "
               "(%.2f ms per preemption), %llu rounds\n",
               i + 1, (unsigned long long)p->preemptions, p->preemptions / w.seconds,
               p->run_delay_ms, p->preemptions ? p->run_delay_ms / p->preemptions : 0,
               (unsigned long long)p->rounds);
        preemptions += p->preemptions;
        waited += p->run_delay_ms;
    }
    printf("preemptions: %.1f/s per spinner, %.2f ms waiting per preemption, %.2f per tick "
           "(%llu ticks)\n",
           preemptions / w.seconds / n, preemptions ? waited / preemptions : 0,
           ticks ? (double)preemptions / ticks : 0, ticks);
    known_report(&w);
    return 0;
}

/*
 * Known answer, kernel difference "per-VMA page-fault locks" (Linux 6.4): faulter threads read
 * fresh pages of their own large anonymous region (one minor fault a page, each mapping the zero
 * page: no memory is used) while a mapper thread maps and unmaps 64 KiB and changes the
 * protection of its own populated 4 MiB buffer, in a loop. Mapping, unmapping and mprotect take
 * the process's mmap_lock for write (mprotect holds it while it rewrites the buffer's 1024 page
 * table entries).
 *
 * True cause, before 6.4 (5.10, 6.1): every fault takes the mmap_lock for read
 * (do_user_addr_fault -> lock_mm_and_find_vma -> down_read), so a faulter that faults while the
 * mapper holds it for write sleeps in rwsem_down_read_slowpath until the mapper's up_write wakes
 * it. From 6.4 (6.12) a fault takes only its VMA's lock (lock_vma_under_rcu), which the mapper
 * never takes: the faulters do not sleep at all. The regions are fenced by PROT_NONE pages so the
 * mapper's VMAs never merge with theirs, and each region is written once before the window so it
 * has its anon_vma (6.4's per-VMA fault path needs one). Naive answer: the mapper's CPU time.
 *
 * The program proves it by its own numbers, per faulter thread, from getrusage(RUSAGE_THREAD):
 * its minor faults per second and its voluntary context switches (sleeps) per 1000 faults,
 * which on a kernel with per-VMA locks is about 0 (a region is reset with MADV_DONTNEED, which
 * takes the mmap_lock, once in --region-mb/4 KiB faults). Throughput: faults per second, all
 * faulters. Lines on stdout:
 *   faulter-N: F faults (R/s), S sleeps (P per 1000 faults), I preemptions, Z resets
 *   mapper: M rounds
 *   faults: R/s per faulter, sleeps: P per 1000 faults
 *   throughput: ...
 */
#include "known.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAX_FAULTERS 16

static double faulters_n = 2, region_mb = 1024, buffer_mb = 4;

/* One faulter's numbers over the window. */
struct faulter_stats {
    uint64_t faults, sleeps, preemptions, resets;
    double seconds;
};
static struct faulter_stats stats[MAX_FAULTERS];
static atomic_ulong mapper_rounds;

/* A region of `bytes` between two PROT_NONE pages: no neighbour can merge with it. */
static char *fenced_region(size_t bytes, int prot, int flags)
{
    char *p = mmap(NULL, bytes + 2 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED || mprotect(p + PAGE, bytes, prot) != 0) {
        perror("mmap region");
        exit(1);
    }
    if (flags & MAP_POPULATE)
        memset(p + PAGE, 1, bytes);
    return p + PAGE;
}

static struct rusage thread_usage(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru;
}

/* Reads one byte of each page of the region, in order: a minor fault each (the zero page). */
static NOINLINE uint64_t fault_pages(volatile char *region, size_t pages, size_t *next)
{
    uint64_t sum = 0;
    for (int i = 0; i < 256 && *next < pages; i++, (*next)++)
        sum += region[*next * PAGE];
    return sum;
}

static NOINLINE void reset_region(char *region, size_t bytes)
{
    if (madvise(region, bytes, MADV_DONTNEED) != 0) {
        perror("madvise");
        exit(1);
    }
}

static NOINLINE void *faulter(void *arg)
{
    int me = (int)(intptr_t)arg;
    size_t bytes = (size_t)(region_mb * (1 << 20)) / PAGE * PAGE, pages = bytes / PAGE, next = 1;
    char *region = fenced_region(bytes, PROT_READ | PROT_WRITE, 0);
    madvise(region, bytes, MADV_NOHUGEPAGE);
    /* Its anon_vma, before the window. */
    region[0] = 1;
    struct faulter_stats *s = &stats[me];
    struct rusage start = thread_usage();
    double t0 = known_now(CLOCK_MONOTONIC);
    uint64_t sum = 0;
    while (!atomic_load_explicit(&known_stop, memory_order_relaxed)) {
        if (next == pages) {
            reset_region(region + PAGE, bytes - PAGE);
            next = 1;
            s->resets++;
        }
        sum += fault_pages(region, pages, &next);
    }
    struct rusage end = thread_usage();
    s->seconds = known_now(CLOCK_MONOTONIC) - t0;
    s->faults = (uint64_t)(end.ru_minflt - start.ru_minflt);
    s->sleeps = (uint64_t)(end.ru_nvcsw - start.ru_nvcsw);
    s->preemptions = (uint64_t)(end.ru_nivcsw - start.ru_nivcsw);
    atomic_fetch_add(&known_units, s->faults);
    atomic_fetch_add_explicit(&known_sink, sum, memory_order_relaxed);
    return NULL;
}

static NOINLINE void map_and_unmap(void)
{
    char *p = mmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    p[0] = 1;
    munmap(p, 16 * PAGE);
}

static NOINLINE void change_protection(char *buffer, size_t bytes, int prot)
{
    if (mprotect(buffer, bytes, prot) != 0) {
        perror("mprotect");
        exit(1);
    }
}

static NOINLINE void *mapper(void *arg)
{
    (void)arg;
    size_t bytes = (size_t)(buffer_mb * (1 << 20)) / PAGE * PAGE;
    char *buffer = fenced_region(bytes, PROT_READ | PROT_WRITE, MAP_POPULATE);
    while (!atomic_load_explicit(&known_stop, memory_order_relaxed)) {
        map_and_unmap();
        change_protection(buffer, bytes, PROT_READ);
        change_protection(buffer, bytes, PROT_READ | PROT_WRITE);
        atomic_fetch_add_explicit(&mapper_rounds, 1, memory_order_relaxed);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct known_option options[] = {
        { "faulters", &faulters_n, "threads faulting pages in" },
        { "region-mb", &region_mb, "each faulter's region, MiB of address space (no memory)" },
        { "buffer-mb", &buffer_mb, "the mapper's populated buffer whose protection it changes" },
    };
    struct known_settings s = known_parse(argc, argv, options, KNOWN_COUNT(options));
    int n = (int)faulters_n;
    if (n < 1 || n > MAX_FAULTERS || region_mb < 1 || buffer_mb < 1) {
        fprintf(stderr, "vma_fault: --faulters 1..%d, --region-mb and --buffer-mb at least 1\n",
                MAX_FAULTERS);
        return 2;
    }
    fprintf(stderr, "vma_fault: %d faulters, regions of %g MiB, mapper buffer %g MiB, %g s\n", n,
            region_mb, buffer_mb, s.duration_s);
    pthread_t threads[MAX_FAULTERS + 1];
    struct known_window w = known_window_open();
    known_start(&threads[0], mapper, NULL, "mapper");
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "faulter-%d", i + 1);
        known_start(&threads[i + 1], faulter, (void *)(intptr_t)i, name);
    }
    known_window_close(&w, s.duration_s);
    known_join_group(threads, n + 1);
    w.units = atomic_load(&known_units);
    uint64_t faults = 0, sleeps = 0;
    double rate = 0;
    for (int i = 0; i < n; i++) {
        struct faulter_stats *f = &stats[i];
        double per_s = f->seconds > 0 ? f->faults / f->seconds : 0;
        printf("faulter-%d: %llu faults (%.1f/s), %llu sleeps (%.2f per 1000 faults), "
               "%llu preemptions, %llu resets\n",
               i + 1, (unsigned long long)f->faults, per_s, (unsigned long long)f->sleeps,
               f->faults ? 1000.0 * f->sleeps / f->faults : 0, (unsigned long long)f->preemptions,
               (unsigned long long)f->resets);
        faults += f->faults;
        sleeps += f->sleeps;
        rate += per_s;
    }
    printf("mapper: %lu rounds\n", atomic_load(&mapper_rounds));
    printf("faults: %.1f/s per faulter, sleeps: %.2f per 1000 faults\n", rate / n,
           faults ? 1000.0 * sleeps / faults : 0);
    known_report(&w);
    return 0;
}

/* mmap_lock contention (lockscope why's kernel-lock test): N threads map fresh anonymous memory,
   fault it in page by page and unmap it, while one thread maps, protects and unmaps in a loop.
   Mapping and unmapping take the process's mmap_lock for write; a fault takes it for read before
   Linux 6.4 and a per-VMA lock after (falling back to mmap_lock when the VMA is changing).
   Usage: mmap_lock [THREADS] [SECONDS] */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define CHUNK (4u << 20)
static volatile int stop;
static void *faulter(void *arg) {
    (void)arg;
    while (!stop) {
        char *p = mmap(0, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) abort();
        for (size_t i = 0; i < CHUNK; i += 4096) p[i] = 1;
        munmap(p, CHUNK);
    }
    return 0;
}
static void *mapper(void *arg) {
    (void)arg;
    while (!stop) {
        char *p = mmap(0, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) abort();
        p[0] = 1;
        mprotect(p, 1 << 16, PROT_READ);
        munmap(p, 1 << 16);
    }
    return 0;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    int secs = argc > 2 ? atoi(argv[2]) : 2;
    pthread_t t[64];
    pthread_create(&t[0], 0, mapper, 0);
    for (int i = 1; i <= n; i++) pthread_create(&t[i], 0, faulter, 0);
    sleep(secs);
    stop = 1;
    for (int i = 0; i <= n; i++) pthread_join(t[i], 0);
    return 0;
}

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Lock workload with known call chains, built by ebpf/tests/it/unwind/mod.rs with
 * `cc -O2 -fomit-frame-pointer -pthread` (no frame pointers anywhere on the stack, as in Debian's
 * libc). Every chain function is non-inlined and does work after its call, so it keeps a frame:
 *   worker    -> outer    -> inner_lock    -> pthread_mutex_lock
 *   cv_worker -> cv_outer -> cv_wait_inner -> pthread_cond_wait
 *   rw_worker -> rw_inner -> pthread_rwlock_wrlock
 * Usage: chains [--wait-for-stdin] [rounds]. It prints its pid and the address range of each lock
 * (so a test can tell the chains' waits apart by futex word), then, with --wait-for-stdin, waits for a line
 * before starting, so a recorder can attach first. Optional: LKS_DLOPEN=path makes
 * the mutex chain go through a function of that library, loaded with dlopen after the go line.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cv_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
static volatile unsigned long sink;
static int rounds = 20;
static volatile int cv_ready;
/* The dlopen'ed library's lock function, when LKS_DLOPEN is set. */
static void (*plugin_lock)(pthread_mutex_t *);

static void hold(long us)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = us * 1000 };

	nanosleep(&ts, NULL);
}

NOINLINE void inner_lock(void)
{
	if (plugin_lock)
		plugin_lock(&mutex);
	else
		pthread_mutex_lock(&mutex);
	sink++;
	hold(2000);
	pthread_mutex_unlock(&mutex);
	sink++;
}

NOINLINE void outer(void)
{
	inner_lock();
	sink++;
}

NOINLINE void *worker(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "mutex-worker");
	for (int i = 0; i < rounds; i++)
		outer();
	sink++;
	return NULL;
}

NOINLINE void cv_wait_inner(void)
{
	pthread_mutex_lock(&cv_mutex);
	while (!cv_ready)
		pthread_cond_wait(&cv, &cv_mutex);
	cv_ready = 0;
	pthread_mutex_unlock(&cv_mutex);
	sink++;
}

NOINLINE void cv_outer(void)
{
	cv_wait_inner();
	sink++;
}

NOINLINE void *cv_worker(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "cv-worker");
	for (int i = 0; i < rounds; i++)
		cv_outer();
	sink++;
	return NULL;
}

NOINLINE void rw_inner(void)
{
	pthread_rwlock_wrlock(&rwlock);
	sink++;
	hold(2000);
	pthread_rwlock_unlock(&rwlock);
	sink++;
}

NOINLINE void *rw_worker(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "rw-worker");
	for (int i = 0; i < rounds; i++)
		rw_inner();
	sink++;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[7];
	int n = 0, arg = 1;

	printf("locks pid=%d mutex=%p+%zu cond=%p+%zu rwlock=%p+%zu\n", (int)getpid(),
	       (void *)&mutex, sizeof(mutex), (void *)&cv, sizeof(cv), (void *)&rwlock,
	       sizeof(rwlock));
	fflush(stdout);
	if (arg < argc && strcmp(argv[arg], "--wait-for-stdin") == 0) {
		char line[16];

		arg++;
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	if (arg < argc)
		rounds = atoi(argv[arg]);
	if (getenv("LKS_DLOPEN")) {
		void *lib = dlopen(getenv("LKS_DLOPEN"), RTLD_NOW);

		if (!lib || !(plugin_lock = (void (*)(pthread_mutex_t *))dlsym(lib, "plugin_lock"))) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 1;
		}
	}
	for (int i = 0; i < 3; i++)
		pthread_create(&threads[n++], NULL, worker, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&threads[n++], NULL, rw_worker, NULL);
	pthread_create(&threads[n++], NULL, cv_worker, NULL);
	/* Signal the condvar waiter once per round, after it has had time to block. */
	for (int i = 0; i < rounds; i++) {
		hold(3000);
		pthread_mutex_lock(&cv_mutex);
		cv_ready = 1;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&cv_mutex);
		while (cv_ready)
			hold(100);
	}
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	printf("done %lu\n", sink);
	return 0;
}

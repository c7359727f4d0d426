/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Workloads with known answers for the target tests (profiler/tests/it/targets.rs), built there
 * with `cc -O2 -fno-omit-frame-pointer -pthread`:
 *   targets forker N   after a line on stdin, forks N children one after the other; each makes
 *                      one condvar wait of 5 ms in short_lived_child -> wait_briefly ->
 *                      pthread_cond_timedwait, prints how long it was awake around it
 *                      ("child PID awake NS ns") and exits at once (it lives ~6 ms: less than
 *                      one of the recorder's polls), then the parent exits.
 *   targets libwait N  after a line on stdin, calls library_wait() of libtargetlib.so N times
 *                      (a 20 ms condvar wait each, in the library), then exits.
 *   targets fleet P T S  after a line on stdin, forks P processes of T threads each; for S
 *                      seconds every thread takes its process's mutex in fleet_lock (held
 *                      100 us), then sleeps 1 ms; the parent waits for them all (the
 *                      recorder's scale workload: profiler/workloads/scale.sh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

void library_wait(void);

static volatile unsigned long sink;

static void deadline_in(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_nsec += ms * 1000000L;
	ts->tv_sec += ts->tv_nsec / 1000000000L;
	ts->tv_nsec %= 1000000000L;
}

/* How long the calling thread has been awake, in ns: on a CPU (its CPU clock) or waiting for one
 * (its run delay in /proc/thread-self/schedstat); -1 when unknown. */
static long long awake_ns(void)
{
	struct timespec cpu;
	unsigned long long on_cpu, run_delay;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	int n = f ? fscanf(f, "%llu %llu", &on_cpu, &run_delay) : 0;

	if (f)
		fclose(f);
	if (n != 2 || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) != 0)
		return -1;
	return (long long)cpu.tv_sec * 1000000000LL + cpu.tv_nsec + (long long)run_delay;
}

/* Prints how long the child was awake from just before it took its deadline to just after its
 * wait returned: the time between the deadline and the futex call (a fresh child's first call
 * binds pthread_cond_timedwait, and a busy machine may preempt it there) is inside, so the
 * kernel's wait is at least 5 ms less that. */
NOINLINE void wait_briefly(void)
{
	pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	struct timespec ts;
	long long before, after;
	int rc = 0;

	pthread_mutex_lock(&mutex);
	before = awake_ns();
	deadline_in(&ts, 5);
	while (rc == 0)
		rc = pthread_cond_timedwait(&cond, &mutex, &ts);
	after = awake_ns();
	pthread_mutex_unlock(&mutex);
	if (before >= 0 && after >= 0)
		dprintf(1, "child %d awake %lld ns\n", (int)getpid(), after - before);
	sink++;
}

NOINLINE void short_lived_child(void)
{
	wait_briefly();
	sink++;
}

static pthread_mutex_t fleet_mutex = PTHREAD_MUTEX_INITIALIZER;
static volatile int fleet_seconds;

static void sleep_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

NOINLINE void fleet_lock(void)
{
	pthread_mutex_lock(&fleet_mutex);
	sleep_us(100);
	pthread_mutex_unlock(&fleet_mutex);
	sink++;
}

static void *fleet_thread(void *arg)
{
	struct timespec start, now;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		fleet_lock();
		sleep_us(1000);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec < fleet_seconds);
	return NULL;
}

static void fleet_process(int threads)
{
	pthread_t tids[256];

	if (threads > 256)
		threads = 256;
	for (int i = 0; i < threads; i++)
		pthread_create(&tids[i], NULL, fleet_thread, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(tids[i], NULL);
}

static void wait_for_go(void)
{
	char line[16];

	printf("%d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		exit(1);
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 10;

	if (argc < 2) {
		fprintf(stderr, "usage: targets forker|libwait N\n");
		return 2;
	}
	wait_for_go();
	if (strcmp(argv[1], "forker") == 0) {
		for (int i = 0; i < n; i++) {
			pid_t child = fork();

			if (child == 0) {
				short_lived_child();
				_exit(0);
			}
			if (child < 0 || waitpid(child, NULL, 0) != child)
				return 1;
		}
		return 0;
	}
	if (strcmp(argv[1], "fleet") == 0) {
		int threads = argc > 3 ? atoi(argv[3]) : 10;

		fleet_seconds = argc > 4 ? atoi(argv[4]) : 10;
		for (int i = 0; i < n; i++) {
			if (fork() == 0) {
				fleet_process(threads);
				_exit(0);
			}
		}
		while (wait(NULL) > 0)
			;
		return 0;
	}
	if (strcmp(argv[1], "libwait") == 0) {
		for (int i = 0; i < n; i++)
			library_wait();
		return 0;
	}
	return 2;
}

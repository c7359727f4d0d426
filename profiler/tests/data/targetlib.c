/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The library of `targets libwait` (targets.c), built twice by profiler/tests/it/targets.rs: as
 * the copy the program is linked against (-DCOPY=host_copy) and as the copy bind-mounted over it
 * in a private mount namespace (-DCOPY=namespace_copy). library_wait() waits 20 ms on a condvar
 * in COPY_wait(), so a recording tells by the function name which file the process mapped.
 */
#include <pthread.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define CAT(a, b) a##b
#define NAMED(copy, suffix) CAT(copy, suffix)

static volatile unsigned long sink;

NOINLINE void NAMED(COPY, _wait)(void)
{
	pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 20 * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&mutex);
	while (rc == 0)
		rc = pthread_cond_timedwait(&cond, &mutex, &ts);
	pthread_mutex_unlock(&mutex);
	sink++;
}

void library_wait(void)
{
	NAMED(COPY, _wait)();
	sink++;
}

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Futex ping-pong with deep stacks, for the unwinding-cost benchmark (examples/unwind_bench.rs):
 * two threads each descend DEPTH non-inlined frames, then hand a token back and forth through two
 * semaphores, so every handoff is one blocking futex wait on a stack about DEPTH + 6 frames deep.
 * Usage: pingpong ROUNDS DEPTH. Prints "pid N", waits for a line on stdin, runs, then prints
 * "elapsed_ns E rounds R".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static sem_t ping, pong;
static long rounds;
static volatile long sink;

__attribute__((noinline)) static long play(int first)
{
	for (long i = 0; i < rounds; i++) {
		if (first) {
			sem_post(&pong);
			sem_wait(&ping);
		} else {
			sem_wait(&pong);
			sem_post(&ping);
		}
	}
	return rounds;
}

/* Recursion that the compiler cannot turn into a loop: work after the call. */
__attribute__((noinline)) long descend(int depth, int first)
{
	long r;

	if (depth == 0)
		return play(first);
	r = descend(depth - 1, first);
	sink += r;
	return r + 1;
}

static int depth;

static void *second(void *arg)
{
	(void)arg;
	descend(depth, 0);
	return NULL;
}

int main(int argc, char **argv)
{
	struct timespec start, end;
	pthread_t thread;
	char line[16];

	if (argc < 3)
		return 2;
	rounds = atol(argv[1]);
	depth = atoi(argv[2]);
	sem_init(&ping, 0, 0);
	sem_init(&pong, 0, 0);
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &start);
	pthread_create(&thread, NULL, second, NULL);
	descend(depth, 1);
	pthread_join(thread, NULL);
	clock_gettime(CLOCK_MONOTONIC, &end);
	printf("elapsed_ns %lld rounds %ld\n",
	       (long long)(end.tv_sec - start.tv_sec) * 1000000000LL + (end.tv_nsec - start.tv_nsec),
	       rounds);
	return 0;
}

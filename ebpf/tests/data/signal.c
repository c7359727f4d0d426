/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * A futex wait inside a signal handler, for the unwinder's signal-frame test: thread `victim`
 * spins in victim_loop (called from victim_outer); the main thread sends it SIGUSR1, whose handler
 * (on_signal) waits on a futex word nobody wakes for 50 ms. The stack of that wait is
 *   syscall <- on_signal <- __restore_rt <- victim_loop <- victim_outer <- start_thread <- clone3
 * and the unwinder must cross the signal frame to get past __restore_rt.
 * Built with -O2 -fomit-frame-pointer. Usage: signal [--wait-for-stdin] [signals].
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned int word;
static volatile int stop;
static volatile unsigned long sink;

__attribute__((noinline)) void on_signal(int sig)
{
	struct timespec timeout = { .tv_sec = 0, .tv_nsec = 50 * 1000 * 1000 };

	(void)sig;
	syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &timeout, NULL, 0);
	sink++;
}

__attribute__((noinline)) void victim_loop(void)
{
	while (!stop)
		sink++;
	sink++;
}

__attribute__((noinline)) void *victim_outer(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "victim");
	victim_loop();
	sink++;
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction action;
	pthread_t victim;
	int arg = 1, signals = 5;

	memset(&action, 0, sizeof(action));
	action.sa_handler = on_signal;
	sigaction(SIGUSR1, &action, NULL);
	printf("locks pid=%d word=%p+4\n", (int)getpid(), (void *)&word);
	fflush(stdout);
	if (arg < argc && strcmp(argv[arg], "--wait-for-stdin") == 0) {
		char line[16];

		arg++;
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	if (arg < argc)
		signals = atoi(argv[arg]);
	pthread_create(&victim, NULL, victim_outer, NULL);
	for (int i = 0; i < signals; i++) {
		struct timespec pause = { .tv_sec = 0, .tv_nsec = 80 * 1000 * 1000 };

		nanosleep(&pause, NULL);
		pthread_kill(victim, SIGUSR1);
	}
	{
		struct timespec pause = { .tv_sec = 0, .tv_nsec = 80 * 1000 * 1000 };

		nanosleep(&pause, NULL);
	}
	stop = 1;
	pthread_join(victim, NULL);
	printf("done %lu\n", sink);
	return 0;
}

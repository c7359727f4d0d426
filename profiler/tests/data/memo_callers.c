/*
 * A thread whose waits the stack memo must tell apart (profiler/tests/it/stack_memo.rs): it waits
 * in turn under two callers, left_caller and right_caller, whose frames have the same size, so
 * every wait starts from the same pc, sp and frame pointer, and only the return address in
 * wait_once's frame tells them apart. Each wait is a FUTEX_WAIT that times out after 50 µs.
 * Prints nothing; argv[1] is the number of waits under each caller.
 */
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int word;

__attribute__((noinline)) static void wait_once(void)
{
	struct timespec timeout = { .tv_sec = 0, .tv_nsec = 50000 };

	syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &timeout, NULL, 0);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void left_caller(void)
{
	wait_once();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void right_caller(void)
{
	wait_once();
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 1000;

	for (long i = 0; i < rounds; i++) {
		left_caller();
		right_caller();
	}
	return 0;
}

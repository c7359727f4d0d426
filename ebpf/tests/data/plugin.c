/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* A library that chains.c loads with dlopen (LKS_DLOPEN) after a recorder attached: its frame
 * sits between inner_lock and pthread_mutex_lock. Built with -O2 -fomit-frame-pointer. */
#include <pthread.h>

volatile unsigned long plugin_sink;

__attribute__((noinline)) void plugin_lock(pthread_mutex_t *mutex)
{
	pthread_mutex_lock(mutex);
	plugin_sink++;
}

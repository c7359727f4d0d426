/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What every probe object shares. The maps declared here (and in stacks.bpf.h, which this file
 * includes) exist once per recording: the Rust side (src/shared.rs) loads them with the
 * `targets` object first and hands their file descriptors to every later object (libbpf
 * reuse_fd), so a process added to `targets`, or a stack captured by any probe, is seen by all.
 * A map that must be shared is declared in this file or in a header it includes; nothing else is
 * needed on the Rust side.
 */
#ifndef LOCKSCOPE_COMMON_BPF_H
#define LOCKSCOPE_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "stacks.bpf.h"

#define LKS_MAX_TARGETS 1024

/* errno values (vmlinux.h has no macros). */
#ifndef E2BIG
#define E2BIG 7
#endif
#ifndef EEXIST
#define EEXIST 17
#endif

/* Process ids (tgid) being recorded: the target, and every process it forks while recorded. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LKS_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

static __always_inline bool is_target(__u32 tgid)
{
	return bpf_map_lookup_elem(&targets, &tgid) != NULL;
}

/* Bit length of v (0 for 0): the histogram slot, as probes::hist::Log2Histogram::slot_of. */
static __always_inline __u32 hist_slot(__u64 v)
{
	__u32 n = 0;

	if (v >> 32) { n += 32; v >>= 32; }
	if (v >> 16) { n += 16; v >>= 16; }
	if (v >> 8) { n += 8; v >>= 8; }
	if (v >> 4) { n += 4; v >>= 4; }
	if (v >> 2) { n += 2; v >>= 2; }
	if (v >> 1) { n += 1; v >>= 1; }
	return n + (__u32)v;
}

#endif /* LOCKSCOPE_COMMON_BPF_H */

//! Arbitrary bytes as a file a traced process maps (seeded with the machine's real libraries):
//! the ELF reader, the CFI table builder and the symbolizer must never panic nor allocate what
//! the file merely claims, and whatever table they build must be sorted, indexed consistently
//! and survive the cache's encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lockscope_ebpf::fuzzing::unwind_table(data);
});

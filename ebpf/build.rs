//! Compiles the BPF programs under `src/bpf/` and generates their Rust skeletons into `OUT_DIR`,
//! one loop over every object (`OBJECTS`); `src/skel.rs` includes each as a module of its name.
//! The skeletons carry the types of the structs and enums of each object's `NAME.h` that its
//! maps and globals use: the Rust side takes them from there, never re-declared.
//!
//! The kernel's types come from the vendored `src/bpf/vmlinux/x86_64/vmlinux.h` (as libbpf-tools
//! and libbpf-bootstrap do): the build needs neither kernel BTF nor bpftool, and gives the same
//! objects on any build machine. CO-RE relocates every field access to the running kernel's
//! layout at load time, and the programs test for what older kernels lack (types, fields, helpers)
//! instead of assuming the vendored kernel's.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::{Path, PathBuf};

/// Every BPF object (`src/bpf/NAME.bpf.c` -> `OUT_DIR/NAME.skel.rs`): the shared-maps owner
/// (`targets`) and the probes.
const OBJECTS: &[&str] = &[
    "targets",
    "futex",
    "offcpu",
    "syscall",
    "lifecycle",
    "klock",
    "mutex_hold",
    "cpu",
];
/// Where the BPF sources and their headers are.
const BPF_DIR: &str = "src/bpf";
/// The vendored kernel types, for the target architecture.
const VMLINUX_DIR: &str = "src/bpf/vmlinux/x86_64";

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // Any header may be included by any object: rebuild on any change in the directory.
    println!("cargo:rerun-if-changed={BPF_DIR}");
    for name in OBJECTS {
        build_skeleton(name, &out_dir);
    }
}

/// Compiles `src/bpf/NAME.bpf.c` and writes its skeleton to `OUT_DIR/NAME.skel.rs`.
fn build_skeleton(name: &str, out_dir: &Path) {
    let source = format!("{BPF_DIR}/{name}.bpf.c");
    if let Err(err) = SkeletonBuilder::new()
        .source(&source)
        .clang_args([
            "-I".as_ref(),
            Path::new(VMLINUX_DIR).as_os_str(),
            "-Wall".as_ref(),
            "-Wno-unused-function".as_ref(),
        ])
        .build_and_generate(out_dir.join(format!("{name}.skel.rs")))
    {
        panic!("failed to build `{source}`: {err:#}");
    }
}

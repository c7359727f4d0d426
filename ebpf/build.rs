//! Compiles the BPF programs under `src/bpf/` and generates their Rust skeletons into `OUT_DIR`.
//!
//! `vmlinux.h` (the running kernel's types, for CO-RE) is generated into `OUT_DIR` with
//! `bpftool btf dump` rather than committed: it is ~3 MB.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The BPF program: one object, one skeleton.
const FUTEX_SRC: &str = "src/bpf/futex.bpf.c";
/// Every header the program includes (for rerun-if-changed).
const HEADERS: &[&str] = &[
    "src/bpf/futex.h",
    "src/bpf/stacks.bpf.h",
    "src/bpf/unwind.h",
    "src/bpf/unwind.bpf.h",
    "src/bpf/unwind_x86_64.bpf.h",
];
/// Generated skeleton, included by `src/skel.rs`.
const FUTEX_SKEL: &str = "futex.skel.rs";
/// The other BPF objects, one skeleton each (`NAME.bpf.c` -> `NAME.skel.rs`): the shared-maps
/// owner (`targets`) and the probes of `src/probes.rs`.
const PROBE_OBJECTS: &[&str] = &["targets", "offcpu", "syscall", "lifecycle", "klock", "hold"];
/// Headers of those objects (for rerun-if-changed).
const PROBE_HEADERS: &[&str] = &[
    "src/bpf/common.h",
    "src/bpf/common.bpf.h",
    "src/bpf/probe.bpf.h",
    "src/bpf/offcpu.h",
    "src/bpf/syscall.h",
    "src/bpf/lifecycle.h",
    "src/bpf/klock.h",
    "src/bpf/hold.h",
];
/// Kernel BTF that `vmlinux.h` is generated from.
const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";
/// Where to look for bpftool (Debian installs it in /usr/sbin, not always on a user's PATH).
const BPFTOOL_CANDIDATES: &[&str] = &["bpftool", "/usr/sbin/bpftool"];

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed={FUTEX_SRC}");
    for header in HEADERS.iter().chain(PROBE_HEADERS) {
        println!("cargo:rerun-if-changed={header}");
    }

    generate_vmlinux_h(&out_dir.join("vmlinux.h"));

    if let Err(err) = SkeletonBuilder::new()
        .source(FUTEX_SRC)
        .clang_args([
            "-I".as_ref(),
            out_dir.as_os_str(),
            "-Wall".as_ref(),
            "-Wno-unused-function".as_ref(),
        ])
        .build_and_generate(out_dir.join(FUTEX_SKEL))
    {
        panic!("failed to build `{FUTEX_SRC}`: {err:#}");
    }
    for name in PROBE_OBJECTS {
        build_skeleton(name, &out_dir);
    }
}

/// Compiles `src/bpf/NAME.bpf.c` and writes its skeleton to `OUT_DIR/NAME.skel.rs`.
fn build_skeleton(name: &str, out_dir: &Path) {
    let source = format!("src/bpf/{name}.bpf.c");
    println!("cargo:rerun-if-changed={source}");
    if let Err(err) = SkeletonBuilder::new()
        .source(&source)
        .clang_args([
            "-I".as_ref(),
            out_dir.as_os_str(),
            "-Wall".as_ref(),
            "-Wno-unused-function".as_ref(),
        ])
        .build_and_generate(out_dir.join(format!("{name}.skel.rs")))
    {
        panic!("failed to build `{source}`: {err:#}");
    }
}

/// Writes the kernel's type definitions as C to `dest`, or fails the build with what to install.
fn generate_vmlinux_h(dest: &Path) {
    for bpftool in BPFTOOL_CANDIDATES {
        let output = match Command::new(bpftool)
            .args(["btf", "dump", "file", KERNEL_BTF, "format", "c"])
            .output()
        {
            Ok(output) => output,
            Err(_) => continue,
        };
        if !output.status.success() {
            panic!(
                "`{bpftool} btf dump file {KERNEL_BTF} format c` failed: {}\n\
                 building lockscope-ebpf needs a kernel with BTF (CONFIG_DEBUG_INFO_BTF=y)",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        if let Err(err) = std::fs::write(dest, &output.stdout) {
            panic!("failed to write `{}`: {err}", dest.display());
        }
        return;
    }
    panic!(
        "bpftool not found (tried {BPFTOOL_CANDIDATES:?}): building lockscope-ebpf generates \
         vmlinux.h with it; install it (Debian/Ubuntu: `apt install bpftool`)"
    );
}

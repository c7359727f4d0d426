//! Compiles every BPF program under `src/bpf/` (each `NAME.bpf.c`) and generates its Rust
//! skeleton into `OUT_DIR/NAME.skel.rs`, and `OUT_DIR/skeletons.rs`, the module list that
//! `src/skel.rs` includes: a new object is one more `.bpf.c` file, found here by its name. The
//! skeletons carry the types of the structs and enums of each object's `NAME.h` that its maps
//! and globals use: the Rust side takes them from there, never re-declared.
//!
//! It also writes `OUT_DIR/probes.rs`, which `src/probes/mod.rs` includes: one module per Rust
//! loader `src/probes/NAME.rs` (every file there but `mod.rs`) and `REGISTRATIONS`, each file's
//! `REGISTERED`, so that a new probe is one more file there too, found here by its name (the list
//! written by `probes/dev/module_list.rs`, as `profiler/build.rs` writes its sections').
//!
//! The kernel's types come from the vendored `src/bpf/vmlinux/x86_64/vmlinux.h` (as libbpf-tools
//! and libbpf-bootstrap do): the build needs neither kernel BTF nor bpftool, and gives the same
//! objects on any build machine. CO-RE relocates every field access to the running kernel's
//! layout at load time, and the programs test for what older kernels lack (types, fields, helpers)
//! instead of assuming the vendored kernel's.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::{Path, PathBuf};

#[path = "../probes/dev/module_list.rs"]
mod module_list;
use module_list::{module_list, write_generated};

/// Where the BPF sources and their headers are.
const BPF_DIR: &str = "src/bpf";
/// The vendored kernel types, for the target architecture.
const VMLINUX_DIR: &str = "src/bpf/vmlinux/x86_64";
/// Where the probes' Rust loaders are, one file each beside `mod.rs`.
const PROBES_DIR: &str = "src/probes";

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // Any header may be included by any object: rebuild on any change in the directory.
    println!("cargo:rerun-if-changed={BPF_DIR}");
    let objects = objects();
    let mut modules = String::new();
    for name in &objects {
        build_skeleton(name, &out_dir);
        modules.push_str(&format!(
            "#[doc = \"`bpf/{name}.bpf.c`.\"]\npub mod {name} {{\n    \
             include!(concat!(env!(\"OUT_DIR\"), \"/{name}.skel.rs\"));\n}}\n"
        ));
    }
    write_generated(&out_dir.join("skeletons.rs"), &modules);

    // A probe file added or removed changes the list. Cargo cannot watch only the names: an edit
    // of a probe file reruns this too, and rebuilds the BPF objects (seconds).
    println!("cargo:rerun-if-changed={PROBES_DIR}");
    let manifest_dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let probes = module_list(
        &Path::new(&manifest_dir).join(PROBES_DIR),
        "const REGISTRATIONS",
        "fn() -> Registered",
        "REGISTERED",
    );
    write_generated(&out_dir.join("probes.rs"), &probes);
}

/// The names of the BPF objects: every `src/bpf/NAME.bpf.c`, sorted (the shared-maps owner
/// `targets` and the probes).
fn objects() -> Vec<String> {
    let entries = std::fs::read_dir(BPF_DIR)
        .unwrap_or_else(|err| panic!("failed to list `{BPF_DIR}`: {err}"));
    let mut names: Vec<String> = entries
        .filter_map(|entry| {
            let file = entry.ok()?.file_name().into_string().ok()?;
            file.strip_suffix(".bpf.c").map(str::to_string)
        })
        .collect();
    names.sort();
    names
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

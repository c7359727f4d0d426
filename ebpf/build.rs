//! Compiles every BPF program under `src/bpf/` (each `NAME.bpf.c`) and generates its Rust
//! skeleton into `OUT_DIR/NAME.skel.rs`, and `OUT_DIR/skeletons.rs`, the module list that
//! `src/skel.rs` includes: a new object is one more `.bpf.c` file, found here by its name. The
//! skeletons carry the types of the structs and enums of each object's `NAME.h` that its maps
//! and globals use: the Rust side takes them from there, never re-declared.
//!
//! It also writes `OUT_DIR/probes.rs`, which `src/probes/mod.rs` includes: one module per Rust
//! loader `src/probes/NAME.rs` (every file there but `mod.rs`) and `REGISTRATIONS`, each file's
//! `REGISTERED`, so that a new probe is one more file there too, found here by its name.
//!
//! The kernel's types come from the vendored `src/bpf/vmlinux/x86_64/vmlinux.h` (as libbpf-tools
//! and libbpf-bootstrap do): the build needs neither kernel BTF nor bpftool, and gives the same
//! objects on any build machine. CO-RE relocates every field access to the running kernel's
//! layout at load time, and the programs test for what older kernels lack (types, fields, helpers)
//! instead of assuming the vendored kernel's.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::{Path, PathBuf};

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
    write(&out_dir.join("skeletons.rs"), &modules);

    // A probe file added or removed changes the list. Cargo cannot watch only the names: an edit
    // of a probe file reruns this too, and rebuilds the BPF objects (seconds).
    println!("cargo:rerun-if-changed={PROBES_DIR}");
    write(&out_dir.join("probes.rs"), &probe_modules());
}

/// Writes a generated file.
fn write(path: &Path, contents: &str) {
    if let Err(err) = std::fs::write(path, contents) {
        panic!("failed to write `{}`: {err}", path.display());
    }
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

/// The probes' modules and their list, for `src/probes/mod.rs`: `mod NAME;` for every
/// `src/probes/NAME.rs` but `mod.rs` (by its absolute path: a `mod` in an included file is
/// otherwise looked for beside the included file, in `OUT_DIR`), sorted, and `REGISTRATIONS`,
/// their `NAME::REGISTERED` in the same order.
fn probe_modules() -> String {
    let manifest_dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest_dir).join(PROBES_DIR);
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("failed to list `{}`: {err}", dir.display()));
    let mut names: Vec<String> = entries
        .filter_map(|entry| {
            let file = entry.ok()?.file_name().into_string().ok()?;
            // Not `mod.rs`, nor an editor's hidden file (`.#futex.rs`).
            file.strip_suffix(".rs")
                .filter(|name| *name != "mod" && !name.starts_with('.'))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    let mut modules = String::new();
    for name in &names {
        let is_ident = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !is_ident {
            panic!("`{PROBES_DIR}/{name}.rs` is not named as a Rust module (`_` for `-`)");
        }
        let path = dir.join(format!("{name}.rs"));
        let path = path
            .to_str()
            .unwrap_or_else(|| panic!("`{}` is not UTF-8", path.display()));
        modules.push_str(&format!("#[path = {path:?}]\nmod {name};\n"));
    }
    modules.push_str(&format!(
        "\n/// Every probe file's registration, in file-name order.\n\
         const REGISTRATIONS: [fn() -> Registered; {}] = [\n",
        names.len()
    ));
    for name in &names {
        modules.push_str(&format!("    {name}::REGISTERED,\n"));
    }
    modules.push_str("];\n");
    modules
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

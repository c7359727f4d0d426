//! The generated skeletons of every BPF object (built by build.rs from each `bpf/NAME.bpf.c` into
//! `OUT_DIR/NAME.skel.rs`), one module each, named as the object: `targets` (the shared-maps
//! owner) and the probes' objects. build.rs writes the module list (`OUT_DIR/skeletons.rs`)
//! from the `.bpf.c` files it finds.

#![allow(
    unused_imports,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    missing_docs
)]

// One module per object, including its generated skeleton.
include!(concat!(env!("OUT_DIR"), "/skeletons.rs"));

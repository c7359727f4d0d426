//! The generated skeleton of `bpf/futex.bpf.c` (built by build.rs into OUT_DIR).

#![allow(unused_imports, clippy::all, clippy::pedantic, clippy::unwrap_used)]

include!(concat!(env!("OUT_DIR"), "/futex.skel.rs"));

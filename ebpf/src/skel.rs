//! The generated skeletons of every BPF object (built by build.rs from `bpf/NAME.bpf.c` into
//! `OUT_DIR/NAME.skel.rs`), one module each, named as the object: `targets` (the shared-maps
//! owner) and the probes' objects. The list is build.rs's `OBJECTS`.

#![allow(
    unused_imports,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    missing_docs
)]

/// One module per object, including its generated skeleton.
macro_rules! skeletons {
    ($($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("`bpf/", stringify!($name), ".bpf.c`.")]
            pub mod $name {
                include!(concat!(env!("OUT_DIR"), "/", stringify!($name), ".skel.rs"));
            }
        )*
    };
}

skeletons!(targets, futex, offcpu, syscall, lifecycle, klock, mutex_hold, cpu);

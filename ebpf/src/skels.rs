//! The generated skeletons of the probe objects other than futex (built by build.rs into
//! OUT_DIR), one module each: `targets` (the shared-maps owner), `offcpu`, `syscall`,
//! `lifecycle`, `klock`, `hold` (the `mutex-hold` probe), `cpu`.

#![allow(
    unused_imports,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    missing_docs
)]

/// `bpf/targets.bpf.c`.
pub mod targets {
    include!(concat!(env!("OUT_DIR"), "/targets.skel.rs"));
}
/// `bpf/offcpu.bpf.c`.
pub mod offcpu {
    include!(concat!(env!("OUT_DIR"), "/offcpu.skel.rs"));
}
/// `bpf/syscall.bpf.c`.
pub mod syscall {
    include!(concat!(env!("OUT_DIR"), "/syscall.skel.rs"));
}
/// `bpf/lifecycle.bpf.c`.
pub mod lifecycle {
    include!(concat!(env!("OUT_DIR"), "/lifecycle.skel.rs"));
}
/// `bpf/klock.bpf.c`.
pub mod klock {
    include!(concat!(env!("OUT_DIR"), "/klock.skel.rs"));
}
/// `bpf/hold.bpf.c`.
pub mod hold {
    include!(concat!(env!("OUT_DIR"), "/hold.skel.rs"));
}
/// `bpf/cpu.bpf.c`.
pub mod cpu {
    include!(concat!(env!("OUT_DIR"), "/cpu.skel.rs"));
}

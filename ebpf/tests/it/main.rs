//! The eBPF backend's integration tests, one test binary: a module per subject, the helpers they
//! share in `common`. Most need root with BPF (ignored otherwise; `.ci/run` runs them).

mod common;

mod probes;
mod record;
mod unwind;

//! The DTrace backend's integration tests, one test binary: a module per subject, the helpers
//! they share in `common`.

mod common;

mod compile;
mod fixtures;
mod recorder;
mod script;

//! The DTrace backend's integration tests, one test binary: a module per subject, the helpers
//! they share in `common`.

mod common;

mod compile;
mod driver;
mod fixtures;
mod script;

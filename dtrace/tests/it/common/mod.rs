//! Helpers shared by the integration tests: the DTrace backend's, from `lockscope-dev`.

pub use lockscope_dev::dtrace::*;

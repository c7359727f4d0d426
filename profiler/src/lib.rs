//! The library half of the `lockscope` binary: everything that turns a recorded [`Profile`] into
//! something to read, with no command-line parsing and no kernel access.
//!
//! - [`report`]: the `lockscope report` text and JSON (header, totals per wait kind, top groups
//!   with stacks and DTrace-style log2 histograms);
//! - [`fold`]: folded stacks (Brendan Gregg's format), the common input of flamegraph tools;
//! - [`flamegraph`]: SVG flamegraphs of waits, drawn by inferno;
//! - [`export`]: `lockscope export` (folded stacks, or the profile as JSON);
//! - [`histogram`] and [`units`]: the text conventions every output shares (log2 histogram
//!   layout, `134 ms`-style times).
//!
//! The binary parses its command line (clap) into the `*Options` structs here; they follow
//! inferno's pattern: `#[non_exhaustive]`, a `Default`, and every field documented with its
//! default, so build them with `Default::default()` and assign fields.
//!
//! [`Profile`]: lockscope_probes::Profile

pub mod bench;
pub mod chart;
pub mod diff;
pub mod export;
pub mod flamegraph;
pub mod fold;
pub mod histogram;
pub mod html;
pub mod import;
pub mod pprof;
pub mod report;
mod sections;
pub mod speedscope;
pub mod sweep;
pub mod units;
pub mod wakeup;

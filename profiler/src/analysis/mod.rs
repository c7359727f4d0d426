//! What every output reads a profile through: its records folded into stacks, the same way for
//! each consumer.
//!
//! - [`fold`]: folded stacks (Brendan Gregg's format), the common input of flamegraph tools, and
//!   the conventions they share (what is folded, how frames are sanitized, what a value
//!   measures);
//! - [`measure`]: what a folded value measures (a weight, and waits or what else the records
//!   hold), as every output labels it;
//! - [`wakeup`]: who-woke-whom chains as folded stacks;
//! - [`canonical`]: canonical stacks, sites and thread groups, OS-neutral so that profiles from
//!   different kernels line up frame by frame (diffs, sweeps, the HTML page);
//! - [`processes`]: the processes of a profile grouped by command, so recordings of many
//!   processes compare by what runs, not by pid.

pub mod canonical;
pub mod fold;
pub mod measure;
pub mod processes;
pub mod wakeup;

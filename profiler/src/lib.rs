//! The library half of the `lockscope` binary: everything that turns a recorded [`Profile`] into
//! something to read, with no command-line parsing; recording is the binary's (its sessions
//! drive the backends), though [`bench`](mod@bench) times system calls of its own.
//!
//! One folder per job, in layers that only reach down (a module uses those above it in this
//! list, never one beside or below it):
//!
//! - [`analysis`]: how every output reads a profile: [`fold`](analysis::fold) (folded stacks,
//!   Brendan Gregg's format, the common input of flamegraph tools),
//!   [`measure`](analysis::measure) (what a folded value measures: waits, or the calls, holds
//!   or samples a profile has without waits),
//!   [`wakeup`](analysis::wakeup) (who-woke-whom chains), [`canonical`](analysis::canonical)
//!   (OS-neutral stacks, sites and thread groups, so that kernels compare frame by frame) and
//!   [`processes`](analysis::processes) (processes grouped by command);
//! - [`render`]: how outputs draw: [`units`](render::units) and
//!   [`histogram`](render::histogram) (the text conventions every output shares: `134 ms`-style
//!   times, DTrace-style log2 histogram layout), [`flamegraph`](render::flamegraph) (SVG
//!   flamegraphs drawn by inferno), [`svg`](render::svg) (small SVG charts, XML escaping) and
//!   the HTML tables the report's sections and the page draw;
//! - [`import`]: other tools' captures as profiles (`perf script`, folded stacks);
//! - [`export`]: `lockscope export` (folded stacks, JSON, wakeup chains), with
//!   [`pprof`](export::pprof) and [`speedscope`](export::speedscope) one file each;
//! - [`report`]: the `lockscope report` text and JSON (header, totals per wait kind, top groups
//!   with stacks and DTrace-style log2 histograms), and its sections, one file per section under
//!   `report/sections/` (found there by the crate's `build.rs`) with its text and HTML tables,
//!   named as its key: a probe's `section` in the catalog (`offcpu`, `syscall`, `lifecycle`,
//!   `klock`, `holds` for mutex-hold, `cpu_saturation` for preempt, `on_cpu` for cpu) or a view
//!   of every wait
//!   (`contention`, `breakdown`);
//! - [`why`]: `lockscope why`, the causes behind the waits of a profile with the bottleneck
//!   analysis (`--probes bottleneck`), best first, as text and JSON;
//! - [`diff`]: two profiles compared site by site (the differential flamegraph; the table and
//!   the JSON one file each);
//! - [`sweep`]: a server across concurrency levels (running it, the load tools' throughput, the
//!   knee and the finding, the table) and its scaling chart ([`chart`](sweep::chart));
//! - [`html`]: one self-contained page of runs, diffs and sweeps, one file per part of the page;
//! - [`bench`](mod@bench): the pthread/futex micro-benchmark suite, apart from all of the above.
//!
//! The binary parses its command line (clap) into the `*Options` structs here; they follow
//! inferno's pattern: `#[non_exhaustive]`, a `Default`, and every field documented with its
//! default, so build them with `Default::default()` and assign fields.
//!
//! A module that can fail says why with its own error type (thiserror):
//! [`RenderError`](render::RenderError), [`ImportError`](import::ImportError),
//! [`ExportError`](export::ExportError), [`DiffError`](diff::DiffError),
//! [`SweepError`](sweep::SweepError) (with [`ThroughputError`](sweep::ThroughputError)),
//! [`HtmlError`](html::HtmlError), [`BenchError`](bench::BenchError) (with a failed benchmark's
//! [`RunError`](bench::RunError)), [`WhyError`](why::WhyError), with
//! [`FoldError`](analysis::fold::FoldError) for the fold checks the outputs share and
//! [`WriteError`](render::WriteError) for an output that could not be written (the report's, the
//! export's, the diff's and the bench's). Each message is one lowercase line naming its object,
//! with its cause as its `source` rather than in the text; the binary adds context and prints
//! the whole chain.
//!
//! [`Profile`]: lockscope_probes::Profile

pub mod analysis;
pub mod bench;
pub mod diff;
pub mod export;
pub mod html;
pub mod import;
pub mod render;
pub mod report;
pub mod sweep;
pub mod why;

//! The library half of the `lockscope` binary: everything that turns a recorded [`Profile`] into
//! something to read, with no command-line parsing and no kernel access.
//!
//! - [`report`]: the `lockscope report` text and JSON (header, totals per wait kind, top groups
//!   with stacks and DTrace-style log2 histograms), and its sections, one file per section under
//!   `report/sections/` named as the probe it shows (`offcpu`, `syscall`, `lifecycle`, `klock`,
//!   `on_cpu` for the cpu probe) or the view (`contention`, `breakdown`, `cpu_saturation`);
//! - [`analysis`]: how every output reads a profile: [`fold`](analysis::fold) (folded stacks,
//!   Brendan Gregg's format, the common input of flamegraph tools),
//!   [`wakeup`](analysis::wakeup) (who-woke-whom chains) and [`canonical`](analysis::canonical)
//!   (OS-neutral stacks, sites and thread groups, for comparing kernels);
//! - [`render`]: how outputs draw: [`units`](render::units) and
//!   [`histogram`](render::histogram) (the text conventions every output shares: `134 ms`-style
//!   times, DTrace-style log2 histogram layout), [`flamegraph`](render::flamegraph) (SVG
//!   flamegraphs drawn by inferno) and [`svg`](render::svg) (the HTML page's small SVG charts);
//! - [`export`]: `lockscope export` (folded stacks, JSON, wakeup chains), with
//!   [`pprof`](export::pprof) and [`speedscope`](export::speedscope) one file each;
//!   [`import`]: other tools' captures as profiles;
//! - [`diff`]: two profiles compared site by site (the differential flamegraph, `table.rs`,
//!   `json.rs`); [`sweep`]: a server across concurrency
//!   levels, with its scaling chart ([`chart`](sweep::chart)); [`html`]: one self-contained page of them;
//! - [`bench`](mod@bench): the pthread/futex micro-benchmark suite.
//!
//! The binary parses its command line (clap) into the `*Options` structs here; they follow
//! inferno's pattern: `#[non_exhaustive]`, a `Default`, and every field documented with its
//! default, so build them with `Default::default()` and assign fields.
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

//! How every output draws what it shows: the text conventions ([`units`]: `134 ms`-style times,
//! average threads and shares of thread time; [`histogram`]: DTrace-style log2 histograms), the
//! flamegraph ([`flamegraph`], drawn by inferno from [`crate::analysis::fold`]'s stacks; why one
//! cannot be drawn is a [`RenderError`]) and the small SVG pictures the HTML page embeds
//! ([`svg`]); an output that cannot be written is a [`WriteError`] (the export's and the diff's).

pub mod flamegraph;
pub mod histogram;
pub mod svg;
pub mod units;
mod write_error;

pub use flamegraph::RenderError;
pub use write_error::WriteError;

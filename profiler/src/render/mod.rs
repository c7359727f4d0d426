//! How every output draws what it shows: the text conventions ([`units`]: `134 ms`-style times,
//! average threads and shares of thread time; [`histogram`]: DTrace-style log2 histograms), the
//! flamegraph ([`flamegraph`], drawn by inferno from [`crate::analysis::fold`]'s stacks; why one
//! cannot be drawn is a [`RenderError`]), the small SVG pictures the HTML page embeds ([`svg`])
//! the names of canonical wait sites, leaf first from their telling frame ([`sites`]) and
//! the HTML tables of the report's sections and the page (`tables`); an output that cannot
//! be written is a [`WriteError`] (the report's, the export's, the diff's and the bench's).

pub mod flamegraph;
pub mod frames;
pub mod histogram;
pub mod sites;
pub mod svg;
pub(crate) mod tables;
pub mod units;
mod write_error;

pub use flamegraph::RenderError;
pub use write_error::WriteError;

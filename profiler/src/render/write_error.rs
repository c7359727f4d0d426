//! [`WriteError`]: an output that could not be written, the one failure the writers of text and
//! JSON outputs share (`report`, `export`, `diff`, `bench`): the report's and the bench's writers
//! return it, the export's and the diff's error types hold it as their `Write` variant.

use std::io;

/// The output could not be written: the writer failed, or serde_json did.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The writer failed.
    #[error("failed to write {what}")]
    Io {
        /// What was being written (`folded stacks`, `the diff table`).
        what: &'static str,
        /// The writer's error.
        #[source]
        source: io::Error,
    },
    /// A JSON document could not be written to the output.
    #[error("failed to write {what}")]
    Json {
        /// What was being written (`the profile as JSON`, `the diff as JSON`).
        what: &'static str,
        /// serde_json's error (the writer's, or the serializer's).
        #[source]
        source: serde_json::Error,
    },
}

impl WriteError {
    /// A [`WriteError::Io`] of `what`, to `map_err` a writer's error with.
    pub(crate) fn io(what: &'static str) -> impl FnOnce(io::Error) -> WriteError {
        move |source| WriteError::Io { what, source }
    }

    /// A [`WriteError::Json`] of `what`, to `map_err` serde_json's error with.
    pub(crate) fn json(what: &'static str) -> impl FnOnce(serde_json::Error) -> WriteError {
        move |source| WriteError::Json { what, source }
    }
}

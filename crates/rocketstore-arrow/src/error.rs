//! The error of building an Arrow batch: the engine's error of the read, or a batch that
//! Arrow rejects (a column over 2 GiB, text that is not UTF-8, an impossible timestamp).

/// An Arrow read's failure. The bindings map [`Error::Store`] as they map every engine error
/// and the others to their "invalid value" error with this message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The read itself failed (I/O, a damaged record, ...).
    #[error(transparent)]
    Store(#[from] rocketstore::Error),
    /// Arrow rejected a built column or batch; `what` names the batch.
    #[error("cannot build the {what}: {source}")]
    Arrow {
        /// The batch being built ("Arrow batch", "Spark batch").
        what: &'static str,
        /// Arrow's reason.
        #[source]
        source: arrow_schema::ArrowError,
    },
    /// A value or a request the batch cannot hold (e.g. a column name that does not exist).
    #[error("{0}")]
    Invalid(String),
}

/// The result of an Arrow read.
pub type Result<T, E = Error> = std::result::Result<T, E>;

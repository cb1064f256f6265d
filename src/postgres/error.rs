//! [`ProvisionError`]: why no PostgreSQL server could be had.

use std::path::PathBuf;

/// The ways to get a PostgreSQL server, named in every error that means "none could serve".
pub const HOW_TO_PROVIDE: &str = "(give a server with `--database-url` or `REWIND_DATABASE_URL`; \
or build with `--features containers` and pass `--postgres container` with a Docker engine running; \
or install the PostgreSQL server binaries (`initdb`, `pg_ctl`) on PATH, under \
`/usr/lib/postgresql/*/bin`, or in `PG_BIN` for the embedded default)";

/// Why provisioning PostgreSQL failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProvisionError {
    /// No `initdb`/`pg_ctl` pair was found for the embedded cluster.
    #[error("no PostgreSQL server binaries found for the embedded cluster (looked in {searched}); {HOW_TO_PROVIDE}")]
    BinariesNotFound {
        /// The places searched, comma separated.
        searched: String,
    },
    /// A PostgreSQL command of the embedded cluster failed.
    #[error("`{command}` failed for the embedded cluster in `{}`: {detail}; {HOW_TO_PROVIDE}", dir.display())]
    Command {
        /// The command line that failed.
        command: String,
        /// The cluster directory.
        dir: PathBuf,
        /// Its exit status and output.
        detail: String,
    },
    /// An I/O error while preparing the embedded cluster.
    #[error("cannot prepare the embedded cluster in `{}`: {source}", dir.display())]
    Io {
        /// The directory involved.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `--postgres container` was asked of a build without the `containers` feature.
    #[error("this build has no container support (rebuild with `--features containers`); {HOW_TO_PROVIDE}")]
    ContainersNotCompiled,
    /// The container engine could not start PostgreSQL.
    #[error("cannot start PostgreSQL container from image `{image}`: {detail}; {HOW_TO_PROVIDE}")]
    Container {
        /// The image reference used.
        image: String,
        /// What the engine said.
        detail: String,
    },
    /// The server was reached but a database operation failed.
    #[error("PostgreSQL at `{url}` failed while {action}: {source}")]
    Database {
        /// The server URL with any password removed.
        url: String,
        /// What the harness was doing.
        action: String,
        /// The driver error.
        #[source]
        source: sqlx::Error,
    },
    /// Applying the spec schema migrations failed.
    #[error("cannot apply the spec schema to `{database}`: {source}")]
    Migrate {
        /// The template database.
        database: String,
        /// The migration error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

//! PostgreSQL provisioning: [`PostgresServer`] is one running server, however it was obtained.
//!
//! Three ways serve, behind one interface:
//! - an existing server given by URL (`--database-url` / `REWIND_DATABASE_URL`);
//! - a container started through testcontainers (cargo feature `containers`);
//! - the default, an ephemeral cluster started from the machine's PostgreSQL binaries.
//!
//! Each scenario then gets its own database cloned from a migrated template
//! ([`TemplateDatabase`]), so scenarios run concurrently without seeing each other.

#[cfg(feature = "containers")]
mod container;
mod embedded;
mod error;
mod initdb_cache;
mod template;

#[cfg(feature = "containers")]
pub use container::ContainerPostgres;
pub use embedded::{
    find_pg_bindir, memory_dir, reap_leftovers, stop_all_embedded, EmbeddedCluster, KeptCluster,
};
#[cfg(test)]
pub(crate) use error::tests as error_tests;
pub use error::{ProvisionError, HOW_TO_PROVIDE};
pub use template::{drop_all_live, redact, ScenarioDatabase, Seed, TemplateDatabase, LOCK_CLASS};

/// How the harness obtains its PostgreSQL server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostgresChoice {
    /// Use the server at this URL; the run creates and drops its own databases there.
    Url(String),
    /// Start a container (cargo feature `containers`; image from `REWIND_PG_IMAGE`).
    Container,
    /// Start an ephemeral cluster from the local PostgreSQL binaries (the default).
    Embedded,
}

impl PostgresChoice {
    /// A short name for logs and reports.
    pub fn label(&self) -> &'static str {
        match self {
            PostgresChoice::Url(_) => "url",
            PostgresChoice::Container => "container",
            PostgresChoice::Embedded => "embedded",
        }
    }
}

enum Guard {
    External,
    Embedded(EmbeddedCluster),
    #[cfg(feature = "containers")]
    Container(ContainerPostgres),
}

/// A running PostgreSQL server and whatever keeps it alive.
///
/// Dropping it stops an embedded cluster or a container; [`PostgresServer::shutdown`] does the
/// same explicitly (and waits for a container to be removed).
pub struct PostgresServer {
    admin_url: String,
    choice: PostgresChoice,
    guard: Guard,
}

impl PostgresServer {
    /// Obtains a server the way `choice` says.
    pub async fn provision(choice: &PostgresChoice) -> Result<Self, ProvisionError> {
        let (admin_url, guard) = match choice {
            PostgresChoice::Url(url) => (url.clone(), Guard::External),
            PostgresChoice::Embedded => {
                let cluster = EmbeddedCluster::start().await?;
                (cluster.admin_url().to_owned(), Guard::Embedded(cluster))
            }
            #[cfg(feature = "containers")]
            PostgresChoice::Container => {
                let container = ContainerPostgres::start().await?;
                (
                    container.admin_url().to_owned(),
                    Guard::Container(container),
                )
            }
            #[cfg(not(feature = "containers"))]
            PostgresChoice::Container => return Err(ProvisionError::ContainersNotCompiled),
        };
        Ok(PostgresServer {
            admin_url,
            choice: choice.clone(),
            guard,
        })
    }

    /// A URL of a database on this server that a superuser (or a role allowed to create
    /// databases) can connect to.
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// The way this server was obtained.
    pub fn choice(&self) -> &PostgresChoice {
        &self.choice
    }

    /// Leaves the server running for the user to inspect (`--keep-databases`) and says how to
    /// reach it and remove it, one line each; an external server is left as it is.
    pub fn keep(self) -> Vec<String> {
        match self.guard {
            Guard::External => Vec::new(),
            Guard::Embedded(cluster) => match cluster.keep() {
                Ok(kept) => vec![
                    format!(
                        "the embedded PostgreSQL still runs, in `{}`: {}",
                        kept.dir.display(),
                        kept.admin_url
                    ),
                    format!("stop and remove it with: {}", kept.remove_command),
                ],
                Err(e) => vec![format!("the embedded PostgreSQL could not be kept: {e}")],
            },
            #[cfg(feature = "containers")]
            Guard::Container(container) => {
                let url = container.admin_url().to_owned();
                let id = container.keep();
                vec![
                    format!("the PostgreSQL container `{id}` still runs: {url}"),
                    format!("remove it with: docker rm -f {id}"),
                ]
            }
        }
    }

    /// Stops what the harness started; an external server is left running.
    pub async fn shutdown(self) {
        match self.guard {
            Guard::External => {}
            Guard::Embedded(cluster) => cluster.stop(),
            #[cfg(feature = "containers")]
            Guard::Container(container) => container.stop().await,
        }
    }
}

//! [`ProvisionError`]: why no PostgreSQL server could be had.
//!
//! A PostgreSQL server error carries the server's message, SQLSTATE code, detail and hint, and
//! also the file, line and routine of the server's own C source that raised it. sqlx's `Display`
//! appends that source line (`role "x" does not exist at line 768`), which reads like a position
//! in the user's input. Every error here words a server error with [`describe_sqlx_error`]
//! instead (also offered as [`ProvisionError::describe_driver_error`]), and does not hand the raw
//! driver error on as its `source()` (the CLI prints every cause of the chain it has not shown
//! yet). [`ProvisionError`]'s `Display` is written by hand for
//! that reason: a new variant needs an arm in it.

use std::fmt;
use std::path::PathBuf;

use sqlx::postgres::PgDatabaseError;

/// The ways to get a PostgreSQL server, named in every error that means "none could serve".
pub const HOW_TO_PROVIDE: &str = "(give a server with `--database-url` or `REWIND_DATABASE_URL`; \
or build with `--features containers` and pass `--postgres container` with a Docker engine running; \
or install the PostgreSQL server binaries (`initdb`, `pg_ctl`) on PATH, under \
`/usr/lib/postgresql/*/bin`, or in `PG_BIN` for the embedded default)";

/// Why provisioning PostgreSQL failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProvisionError {
    /// No `initdb`/`pg_ctl` pair was found for the embedded cluster.
    BinariesNotFound {
        /// The places searched, comma separated.
        searched: String,
    },
    /// `PG_BIN` names a directory without `initdb` and `pg_ctl`.
    BadPgBin {
        /// The directory `PG_BIN` names.
        dir: PathBuf,
        /// What to do instead.
        found: String,
    },
    /// A PostgreSQL command of the embedded cluster failed.
    Command {
        /// The command line that failed.
        command: String,
        /// The cluster directory.
        dir: PathBuf,
        /// Its exit status and output.
        detail: String,
    },
    /// An I/O error while preparing the embedded cluster.
    Io {
        /// The directory involved.
        dir: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `--postgres container` was asked of a build without the `containers` feature.
    ContainersNotCompiled,
    /// The container engine could not start PostgreSQL.
    Container {
        /// The image reference used.
        image: String,
        /// What the engine said.
        detail: String,
    },
    /// The server was reached but a database operation failed.
    Database {
        /// The server URL with any password removed.
        url: String,
        /// What the harness was doing.
        action: String,
        /// The driver error.
        source: sqlx::Error,
    },
    /// Applying the spec schema migrations failed.
    Migrate {
        /// The template database.
        database: String,
        /// The migration error.
        source: sqlx::migrate::MigrateError,
    },
    /// Writing a fixture into a template of the run failed.
    Seed {
        /// The template database.
        database: String,
        /// What went wrong.
        detail: String,
    },
}

impl fmt::Display for ProvisionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BinariesNotFound { searched } => write!(
                f,
                "no PostgreSQL server binaries found for the embedded cluster (looked in \
                 {searched}); {HOW_TO_PROVIDE}"
            ),
            Self::BadPgBin { dir, found } => write!(
                f,
                "`PG_BIN` is `{}`, which holds no `initdb` and `pg_ctl`: {found}",
                dir.display()
            ),
            Self::Command {
                command,
                dir,
                detail,
            } => write!(
                f,
                "`{command}` failed for the embedded cluster in `{}`: {detail}; {HOW_TO_PROVIDE}",
                dir.display()
            ),
            Self::Io { dir, source } => write!(
                f,
                "cannot prepare the embedded cluster in `{}`: {source}",
                dir.display()
            ),
            Self::ContainersNotCompiled => write!(
                f,
                "this build has no container support (rebuild with `--features containers`); \
                 {HOW_TO_PROVIDE}"
            ),
            Self::Container { image, detail } => write!(
                f,
                "cannot start PostgreSQL container from image `{image}`: {detail}; \
                 {HOW_TO_PROVIDE}"
            ),
            Self::Database {
                url,
                action,
                source,
            } => write!(
                f,
                "PostgreSQL at `{url}` failed while {action}: {}",
                describe_sqlx_error(source)
            ),
            Self::Migrate { database, source } => write!(
                f,
                "cannot apply the spec schema to `{database}`: {}",
                describe_migrate_error(source)
            ),
            Self::Seed { database, detail } => write!(f, "seeding `{database}`: {detail}"),
        }
    }
}

impl std::error::Error for ProvisionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Database { source, .. } => sqlx_source(source),
            Self::Migrate { source, .. } => match migrate_sqlx_error(source) {
                Some(inner) => sqlx_source(inner),
                None => Some(source),
            },
            _ => None,
        }
    }
}

impl ProvisionError {
    /// A driver error in the words this module uses for server errors (see
    /// [`describe_sqlx_error`]), for other errors that carry one, such as a failed seeding
    /// statement.
    pub fn describe_driver_error(error: &sqlx::Error) -> String {
        describe_sqlx_error(error)
    }
}

/// The source to hand on for a driver error whose wording [`describe_sqlx_error`] already
/// gave: nothing for a server error (sqlx's own text would repeat it with the server's
/// source-code line), else the error itself, whose `Display` the wording is.
fn sqlx_source(error: &sqlx::Error) -> Option<&(dyn std::error::Error + 'static)> {
    match error {
        sqlx::Error::Database(_) => None,
        other => Some(other),
    }
}

/// The driver error a migration error wraps, if any.
fn migrate_sqlx_error(error: &sqlx::migrate::MigrateError) -> Option<&sqlx::Error> {
    match error {
        sqlx::migrate::MigrateError::Execute(inner)
        | sqlx::migrate::MigrateError::ExecuteMigration(inner, _) => Some(inner),
        _ => None,
    }
}

/// A migration error in words: a server error is worded by [`describe_sqlx_error`].
fn describe_migrate_error(error: &sqlx::migrate::MigrateError) -> String {
    match error {
        sqlx::migrate::MigrateError::Execute(inner) => {
            format!("while executing migrations: {}", describe_sqlx_error(inner))
        }
        sqlx::migrate::MigrateError::ExecuteMigration(inner, version) => format!(
            "while executing migration {version}: {}",
            describe_sqlx_error(inner)
        ),
        other => other.to_string(),
    }
}

/// A driver error in words. A server error reads as the server's message with its SQLSTATE
/// code, detail and hint (each on the same line), and, for the usual connection refusals, what
/// to change; never the server's source-code line (`at line 768`) that sqlx's `Display` adds.
/// Other driver errors read as sqlx words them.
fn describe_sqlx_error(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(db) => match db.try_downcast_ref::<PgDatabaseError>() {
            Some(pg) => describe_server_error(pg.message(), pg.code(), pg.detail(), pg.hint()),
            None => {
                let code = db.code();
                describe_server_error(db.message(), code.as_deref().unwrap_or("?"), None, None)
            }
        },
        sqlx::Error::Migrate(inner) => describe_migrate_error(inner),
        other => other.to_string(),
    }
}

/// `message (SQLSTATE code; detail: ...; hint: ...)`, with the harness's advice for a few
/// codes the server gives no hint for.
fn describe_server_error(
    message: &str,
    code: &str,
    detail: Option<&str>,
    hint: Option<&str>,
) -> String {
    let one_line = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut notes = vec![format!("SQLSTATE {code}")];
    if let Some(detail) = detail.filter(|d| !d.trim().is_empty()) {
        notes.push(format!("detail: {}", one_line(detail)));
    }
    match hint.filter(|h| !h.trim().is_empty()) {
        Some(hint) => notes.push(format!("hint: {}", one_line(hint))),
        None => {
            if let Some(advice) = advice(code) {
                notes.push(advice.to_owned());
            }
        }
    }
    format!("{} ({})", one_line(message), notes.join("; "))
}

/// What to change for the server errors a misconfigured URL or server typically gives.
fn advice(code: &str) -> Option<&'static str> {
    Some(match code {
        "28000" => "check the user name in the URL: the server knows no such role, or refuses it",
        "28P01" => "check the user name and password in the URL",
        "3D000" => {
            "check the database name in the URL; the harness connects to an existing \
                    database, such as `postgres`, and creates its own beside it"
        }
        "42501" => {
            "the role in the URL lacks a privilege the harness needs: it creates and \
                    drops databases, so give it CREATEDB (or use a superuser)"
        }
        "53300" => {
            "the server has no connection slot left: close other sessions or raise \
                    `max_connections`"
        }
        "57P03" => "the server is starting up or shutting down: retry when it is up",
        _ => return None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use sqlx::Connection;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::ProvisionError;

    /// The fields PostgreSQL 15 sends when the role of a connection does not exist, with the
    /// source file, line and routine of the server's C code that sqlx's `Display` shows.
    const NO_ROLE: &[(u8, &str)] = &[
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "28000"),
        (b'M', "role \"nobody\" does not exist"),
        (b'F', "miscinit.c"),
        (b'L', "768"),
        (b'R', "InitializeSessionUserId"),
    ];

    /// A server that answers the startup message of one connection with an `ErrorResponse` of
    /// `fields`, as PostgreSQL refuses a connection; returns the URL to connect to.
    async fn refusing_server(fields: &'static [(u8, &'static str)]) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a local port");
        let port = listener.local_addr().expect("local address").port();
        tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            // The startup message: its length, then the rest.
            let mut length = [0u8; 4];
            if socket.read_exact(&mut length).await.is_err() {
                return;
            }
            let mut rest = vec![0u8; (u32::from_be_bytes(length) as usize).saturating_sub(4)];
            if socket.read_exact(&mut rest).await.is_err() {
                return;
            }
            let mut body: Vec<u8> = Vec::new();
            for (code, value) in fields {
                body.push(*code);
                body.extend_from_slice(value.as_bytes());
                body.push(0);
            }
            body.push(0);
            let mut message = vec![b'E'];
            message.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
            message.extend_from_slice(&body);
            let _ = socket.write_all(&message).await;
            let _ = socket.flush().await;
        });
        format!("postgres://nobody@127.0.0.1:{port}/x?sslmode=disable")
    }

    /// The driver error of connecting to a server that refuses with `fields` (also for the
    /// other modules' tests of server errors).
    pub(crate) async fn refusal(fields: &'static [(u8, &'static str)]) -> (String, sqlx::Error) {
        let url = refusing_server(fields).await;
        let error = sqlx::PgConnection::connect(&url)
            .await
            .expect_err("the server refuses");
        (url, error)
    }

    #[tokio::test]
    async fn a_server_error_shows_its_message_and_sqlstate_without_the_source_line() {
        let (url, source) = refusal(NO_ROLE).await;
        // sqlx's own wording ends with the server's C source line.
        assert_eq!(
            source.to_string(),
            "error returned from database: role \"nobody\" does not exist at line 768"
        );
        let err = ProvisionError::Database {
            url: url.clone(),
            action: "connecting".to_owned(),
            source,
        };
        assert_eq!(
            err.to_string(),
            format!(
                "PostgreSQL at `{url}` failed while connecting: role \"nobody\" does not exist \
                 (SQLSTATE 28000; check the user name in the URL: the server knows no such \
                 role, or refuses it)"
            )
        );
        // No cause repeats sqlx's wording (the CLI prints every cause it has not shown).
        assert!(std::error::Error::source(&err).is_none());
    }

    #[tokio::test]
    async fn a_server_error_shows_its_detail_and_hint_on_one_line() {
        const FIELDS: &[(u8, &str)] = &[
            (b'S', "ERROR"),
            (b'V', "ERROR"),
            (b'C', "55006"),
            (
                b'M',
                "database \"template_x\" is being accessed by other users",
            ),
            (b'D', "There is 1 other session\nusing the database."),
            (b'H', "Close the other sessions first."),
            (b'F', "dbcommands.c"),
            (b'L', "1755"),
            (b'R', "dropdb"),
        ];
        let (_, source) = refusal(FIELDS).await;
        let err = ProvisionError::Database {
            url: "postgres://h/postgres".to_owned(),
            action: "dropping `template_x`".to_owned(),
            source,
        };
        assert_eq!(
            err.to_string(),
            "PostgreSQL at `postgres://h/postgres` failed while dropping `template_x`: database \
             \"template_x\" is being accessed by other users (SQLSTATE 55006; detail: There is \
             1 other session using the database.; hint: Close the other sessions first.)"
        );
    }

    #[tokio::test]
    async fn a_failed_migration_shows_the_server_error_without_the_source_line() {
        const FIELDS: &[(u8, &str)] = &[
            (b'S', "ERROR"),
            (b'V', "ERROR"),
            (b'C', "42P07"),
            (b'M', "relation \"scopes\" already exists"),
            (b'F', "heap.c"),
            (b'L', "1146"),
            (b'R', "heap_create_with_catalog"),
        ];
        let (_, error) = refusal(FIELDS).await;
        let err = ProvisionError::Migrate {
            database: "rewind_template_1".to_owned(),
            source: sqlx::migrate::MigrateError::ExecuteMigration(error, 1),
        };
        assert_eq!(
            err.to_string(),
            "cannot apply the spec schema to `rewind_template_1`: while executing migration 1: \
             relation \"scopes\" already exists (SQLSTATE 42P07)"
        );
        assert!(std::error::Error::source(&err).is_none());
    }

    #[tokio::test]
    async fn a_driver_error_that_is_not_the_servers_keeps_its_wording_and_cause() {
        // Nothing listens on a port just released.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("address").port()
        };
        let url = format!("postgres://nobody@127.0.0.1:{port}/x?sslmode=disable");
        let source = sqlx::PgConnection::connect(&url)
            .await
            .expect_err("nothing listens");
        let said = source.to_string();
        let err = ProvisionError::Database {
            url: url.clone(),
            action: "connecting".to_owned(),
            source,
        };
        assert_eq!(
            err.to_string(),
            format!("PostgreSQL at `{url}` failed while connecting: {said}")
        );
        assert!(std::error::Error::source(&err).is_some());
    }
}

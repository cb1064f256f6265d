//! [`ContainerPostgres`]: PostgreSQL in a container started through testcontainers (cargo
//! feature `containers`).
//!
//! The image comes from `REWIND_PG_IMAGE` (`name[:tag]`, also `name@sha256:...`), by default
//! [`DEFAULT_IMAGE`]: the official image at a supported major version, never the testcontainers
//! module's own default (`postgres:11-alpine`, end of life). Any image honouring the official
//! image's `POSTGRES_*` variables and log lines works, e.g. the registry-free
//! `localhost/rewind-pg:15` that `ci/build-pg-image.sh` builds from the host's binaries.
//!
//! The engine is found the testcontainers way: `DOCKER_HOST`, the `tc.host`/`docker.host`
//! properties in `~/.testcontainers.properties`, then `/var/run/docker.sock`
//! (`ci/docker-engine.sh` provides one on a bare Debian machine). Start-up is bounded by
//! [`START_TIMEOUT`]; every failure becomes a [`ProvisionError::Container`] that says what went
//! wrong (no engine, image missing and not pullable, server never ready).
//!
//! The container is removed by [`ContainerPostgres::stop`]; if it is dropped instead,
//! testcontainers removes it in its `Drop` (which needs the Tokio runtime still running), and its
//! watchdog removes it on Ctrl-C / SIGTERM.

use std::time::{Duration, Instant};

use sqlx::{Connection as _, PgConnection};
use testcontainers_modules::postgres::Postgres;
use testcontainers_modules::testcontainers::bollard::errors::Error as BollardError;
use testcontainers_modules::testcontainers::core::error::{ClientError, WaitContainerError};
use testcontainers_modules::testcontainers::core::logs::WaitLogError;
use testcontainers_modules::testcontainers::runners::AsyncRunner as _;
use testcontainers_modules::testcontainers::{ContainerAsync, ImageExt as _, TestcontainersError};

use super::ProvisionError;

/// The image used when `REWIND_PG_IMAGE` is unset or empty.
const DEFAULT_IMAGE: &str = "postgres:17-alpine";

/// Environment variable naming the image (`name[:tag]`).
const IMAGE_ENV: &str = "REWIND_PG_IMAGE";

/// Upper bound for [`ContainerPostgres::start`]: creating the container (pulling the image if the
/// engine lacks it), starting it and waiting until the server accepts connections.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// How long testcontainers waits for the "ready" log lines once the container is started; less
/// than [`START_TIMEOUT`] so that a server that never gets ready is reported as such.
const READY_TIMEOUT: Duration = Duration::from_secs(110);

/// The port PostgreSQL listens on inside the container.
const PG_PORT: u16 = 5432;

/// Credentials and database of the testcontainers Postgres module's defaults.
const USER: &str = "postgres";
const PASSWORD: &str = "postgres";
const DATABASE: &str = "postgres";

/// A PostgreSQL server running in a container, removed by [`ContainerPostgres::stop`].
#[derive(Debug)]
pub struct ContainerPostgres {
    // Boxed: the request it keeps is large, and this sits in an enum beside small variants.
    container: Box<ContainerAsync<Postgres>>,
    image: String,
    admin_url: String,
}

impl ContainerPostgres {
    /// Starts PostgreSQL in a container and waits until it accepts connections.
    ///
    /// The image is `REWIND_PG_IMAGE` (`name[:tag]`), or `postgres:17-alpine`. Fails with
    /// [`ProvisionError::Container`] when no engine answers, the image is neither present nor
    /// pullable, or the server is not ready within 120 s.
    pub async fn start() -> Result<Self, ProvisionError> {
        let image = std::env::var(IMAGE_ENV)
            .ok()
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
            .unwrap_or_else(|| DEFAULT_IMAGE.to_owned());
        let (name, tag) = split_image_ref(&image);
        let fail = |detail: String| ProvisionError::Container {
            image: image.clone(),
            detail,
        };

        let deadline = Instant::now() + START_TIMEOUT;
        let request = Postgres::default()
            .with_name(name)
            .with_tag(tag)
            .with_startup_timeout(READY_TIMEOUT);
        let container = match tokio::time::timeout(START_TIMEOUT, request.start()).await {
            Ok(Ok(container)) => container,
            Ok(Err(err)) => return Err(fail(describe_start_error(&err, &image))),
            Err(_elapsed) => {
                return Err(fail(format!(
                    "no running PostgreSQL within {} s: the engine was too slow to pull the image \
                     or to create and start the container (a first pull may need longer: pull it \
                     beforehand with `docker pull {image}`)",
                    START_TIMEOUT.as_secs()
                )))
            }
        };

        let port = match container.get_host_port_ipv4(PG_PORT).await {
            Ok(port) => port,
            Err(err) => {
                let detail = format!("no host port mapped to {PG_PORT}/tcp: {}", chain(&err));
                remove(container).await;
                return Err(fail(detail));
            }
        };
        let host = match url_host(&container).await {
            Ok(host) => host,
            Err(detail) => {
                remove(container).await;
                return Err(fail(detail));
            }
        };
        let admin_url = format!("postgres://{USER}:{PASSWORD}@{host}:{port}/{DATABASE}");

        // The module's wait conditions (the "ready" log line from both the init and the final
        // server) normally suffice; a real query also covers the engine's port forwarding.
        if let Err(last) = wait_until_accepting(&admin_url, deadline).await {
            remove(container).await;
            return Err(fail(format!(
                "the container started but PostgreSQL at {host}:{port} did not answer `select 1` \
                 within {} s of the start: {last}",
                START_TIMEOUT.as_secs()
            )));
        }

        tracing::info!(image = %image, container = %container.id(), port, "PostgreSQL container ready");
        Ok(ContainerPostgres {
            container: Box::new(container),
            image,
            admin_url,
        })
    }

    /// The superuser URL: `postgres://postgres:postgres@127.0.0.1:<mapped port>/postgres`
    /// (the engine's host instead of `127.0.0.1` when `DOCKER_HOST` is a TCP address).
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// The image reference the container runs.
    pub fn image(&self) -> &str {
        &self.image
    }

    /// The engine's id of the container.
    pub fn container_id(&self) -> &str {
        self.container.id()
    }

    /// Leaves the container running (`--keep-databases`): returns its id; the user removes it
    /// (`docker rm -f <id>`).
    pub fn keep(self) -> String {
        let id = self.container.id().to_owned();
        // Its `Drop` would remove it.
        std::mem::forget(self.container);
        id
    }

    /// Stops and removes the container (a failure is logged, not returned).
    pub async fn stop(self) {
        remove(*self.container).await;
    }
}

/// Splits `name[:tag]` into name and tag (`latest` when absent). A colon belongs to the tag only
/// after the last `/`, so `localhost:5000/pg` is a name; `name@sha256:...` splits into
/// `name@sha256` and the hex digest, which testcontainers joins back with a colon.
fn split_image_ref(image: &str) -> (&str, &str) {
    let last_slash = image.rfind('/').map_or(0, |at| at + 1);
    match image[last_slash..].rfind(':') {
        Some(at) if at + 1 < image.len() - last_slash => {
            (&image[..last_slash + at], &image[last_slash + at + 1..])
        }
        Some(at) => (&image[..last_slash + at], "latest"),
        None => (image, "latest"),
    }
}

/// The host to put in the URL: the loopback address for a local engine (unix socket; the
/// published port listens on every local interface), the engine's host for a TCP `DOCKER_HOST`.
async fn url_host(container: &ContainerAsync<Postgres>) -> Result<String, String> {
    let docker_host = std::env::var("DOCKER_HOST").unwrap_or_default();
    let remote = ["tcp://", "http://", "https://"]
        .iter()
        .any(|scheme| docker_host.starts_with(scheme));
    if !remote {
        return Ok("127.0.0.1".to_owned());
    }
    container
        .get_host()
        .await
        .map(|host| host.to_string())
        .map_err(|err| {
            format!(
                "cannot tell the engine's host from DOCKER_HOST={docker_host}: {}",
                chain(&err)
            )
        })
}

/// Connects and runs `select 1` until it works or `deadline` passes; returns the last error.
async fn wait_until_accepting(url: &str, deadline: Instant) -> Result<(), String> {
    const ATTEMPT: Duration = Duration::from_secs(5);
    const PAUSE: Duration = Duration::from_millis(100);
    loop {
        let attempt = async {
            let mut conn = PgConnection::connect(url).await?;
            let one: i32 = sqlx::query_scalar("select 1").fetch_one(&mut conn).await?;
            // Closing politely is best effort: the answer is what counts.
            let _ = conn.close().await;
            Ok::<i32, sqlx::Error>(one)
        };
        let last = match tokio::time::timeout(ATTEMPT, attempt).await {
            Ok(Ok(1)) => return Ok(()),
            Ok(Ok(other)) => format!("`select 1` returned {other}"),
            Ok(Err(err)) => err.to_string(),
            Err(_elapsed) => format!("no answer within {} s", ATTEMPT.as_secs()),
        };
        if Instant::now() + PAUSE >= deadline {
            return Err(last);
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// Removes the container, logging (not returning) a failure.
async fn remove(container: ContainerAsync<Postgres>) {
    let id = container.id().to_owned();
    match container.rm().await {
        Ok(()) => tracing::debug!(container = %id, "PostgreSQL container removed"),
        Err(err) => {
            tracing::warn!(container = %id, "cannot remove the PostgreSQL container: {}", chain(&err))
        }
    }
}

/// Where testcontainers looks for the engine, as far as the environment tells.
fn engine_location() -> String {
    match std::env::var("DOCKER_HOST") {
        Ok(host) if !host.is_empty() => format!("DOCKER_HOST={host}"),
        _ => "unix:///var/run/docker.sock (DOCKER_HOST is unset)".to_owned(),
    }
}

/// A readable account of why `start()` failed.
fn describe_start_error(err: &TestcontainersError, image: &str) -> String {
    match err {
        TestcontainersError::Client(ClientError::PullImage { err: inner, .. }) => {
            if engine_unreachable(inner) {
                no_engine(err)
            } else {
                format!(
                    "the engine has no image `{image}` and could not pull it ({}); pull it beforehand, \
                     or without a registry build one from the host's PostgreSQL with \
                     `ci/build-pg-image.sh` and set REWIND_PG_IMAGE=localhost/rewind-pg:<major>",
                    chain(err)
                )
            }
        }
        TestcontainersError::Client(client) if client_unreachable(client) => no_engine(err),
        TestcontainersError::WaitContainer(WaitContainerError::StartupTimeout) => format!(
            "the container did not log \"database system is ready to accept connections\" (on \
             both stdout and stderr, as the official image does) within {} s of starting",
            READY_TIMEOUT.as_secs()
        ),
        TestcontainersError::WaitContainer(WaitContainerError::WaitLog(
            WaitLogError::EndOfStream(lines),
        )) => {
            let tail: Vec<String> = lines
                .iter()
                .flat_map(|bytes| {
                    String::from_utf8_lossy(bytes)
                        .lines()
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .filter(|line| !line.trim().is_empty())
                .collect();
            let shown = tail[tail.len().saturating_sub(8)..].join(" | ");
            format!("the container stopped before PostgreSQL was ready; its last output: {shown}")
        }
        other => chain(other),
    }
}

fn no_engine(err: &TestcontainersError) -> String {
    format!(
        "no Docker engine answered at {} ({}); start one (on Debian as root: `ci/docker-engine.sh`) \
         or point DOCKER_HOST at one",
        engine_location(),
        chain(err)
    )
}

/// True when the client error means the engine could not be reached at all.
fn client_unreachable(err: &ClientError) -> bool {
    match err {
        ClientError::Init(inner)
        | ClientError::CreateContainer(inner)
        | ClientError::StartContainer(inner)
        | ClientError::InspectContainer(inner)
        | ClientError::ListContainers(inner)
        | ClientError::CreateNetwork(inner)
        | ClientError::InspectNetwork(inner) => engine_unreachable(inner),
        ClientError::PullImage { err, .. } => engine_unreachable(err),
        _ => false,
    }
}

/// True for the transport-level errors bollard reports when nothing listens at the engine address.
fn engine_unreachable(err: &BollardError) -> bool {
    matches!(
        err,
        BollardError::SocketNotFoundError(_)
            | BollardError::HyperLegacyError { .. }
            | BollardError::IOError { .. }
            | BollardError::RequestTimeoutError
    )
}

/// An error and its sources, joined with ": " (repeated messages are skipped).
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let message = cause.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_image_references() {
        assert_eq!(
            split_image_ref("postgres:17-alpine"),
            ("postgres", "17-alpine")
        );
        assert_eq!(split_image_ref("postgres"), ("postgres", "latest"));
        assert_eq!(split_image_ref("postgres:"), ("postgres", "latest"));
        assert_eq!(
            split_image_ref("localhost/rewind-pg:15"),
            ("localhost/rewind-pg", "15")
        );
        assert_eq!(
            split_image_ref("localhost:5000/pg"),
            ("localhost:5000/pg", "latest")
        );
        assert_eq!(
            split_image_ref("localhost:5000/pg:16"),
            ("localhost:5000/pg", "16")
        );
        assert_eq!(split_image_ref("pg@sha256:abc"), ("pg@sha256", "abc"));
    }

    #[test]
    fn chain_joins_sources_without_repeats() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = TestcontainersError::Io(io);
        assert_eq!(chain(&err), "I/O error: refused");
    }

    /// Run with a Docker engine (`ci/docker-engine.sh`) and, without a registry,
    /// `REWIND_PG_IMAGE=localhost/rewind-pg:15` (`ci/build-pg-image.sh`):
    /// `cargo test --features containers --lib container -- --ignored`.
    #[tokio::test]
    #[ignore = "needs a Docker engine"]
    async fn starts_a_container_that_answers_select_1() {
        let began = Instant::now();
        let server = ContainerPostgres::start()
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        eprintln!(
            "container {} from {} ready in {:.2} s at {}",
            server.container_id(),
            server.image(),
            began.elapsed().as_secs_f64(),
            server.admin_url()
        );
        assert!(server
            .admin_url()
            .starts_with("postgres://postgres:postgres@"));

        let mut conn = PgConnection::connect(server.admin_url())
            .await
            .unwrap_or_else(|err| panic!("connecting to {}: {err}", server.admin_url()));
        let one: i32 = sqlx::query_scalar("select 1")
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|err| panic!("select 1: {err}"));
        assert_eq!(one, 1);
        let version: String = sqlx::query_scalar("select version()")
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|err| panic!("select version(): {err}"));
        eprintln!("{version}");
        conn.close()
            .await
            .unwrap_or_else(|err| panic!("closing: {err}"));

        let stopping = Instant::now();
        server.stop().await;
        eprintln!("removed in {:.2} s", stopping.elapsed().as_secs_f64());
    }
}

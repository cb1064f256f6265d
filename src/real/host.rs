//! Where the real runtimes run: on this machine (`local`), or on a second host the harness
//! reaches the way a daemon on another machine would be reached (`docker:NAME`, a running
//! container with its own network namespace and its own filesystem).
//!
//! On a second host the runtimes' state (homes, transcripts, sessions) lives only there. The
//! harness and the implementation keep their side on this machine: the journals and fault plans
//! of the journaling proxies, the fake model APIs, the delivery witness. Every program runs on
//! the host through `docker exec` with exactly the environment and directory it is given
//! (`env -i`, in the directory); a file is written or read through `docker exec`; the OpenCode server
//! listens on the host's own address and the fake models on the address the host reaches this
//! machine at. The scenario's directories are made under the same paths on both sides, so the
//! paths handed to the implementation mean the runtime's state there and the proxy's journal
//! here.

use std::net::IpAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::process::Command;

use super::RealError;

pub use rewind_mock_runtimes::proxy::{remote_env, EXEC_ENV, EXEC_VARS_ENV};

/// How long one file or directory operation on a second host may take.
const FILE_LIMIT: Duration = Duration::from_secs(60);

/// Where the real runtimes run.
#[derive(Debug, Clone, Default)]
pub enum RuntimeHost {
    /// On this machine.
    #[default]
    Local,
    /// In a running container, reached through the container CLI.
    Container(Arc<Container>),
}

/// A running container serving as the runtimes' host.
#[derive(Debug)]
pub struct Container {
    /// The docker-compatible CLI (`docker`, or `$CONTAINER_CLI`).
    pub cli: String,
    /// The container's name.
    pub name: String,
    /// Its address, where the harness reaches its servers.
    pub address: IpAddr,
    /// The address it reaches this machine at (its network's gateway).
    pub gateway: IpAddr,
}

fn host_error(detail: impl Into<String>) -> RealError {
    RealError::runtime("runtime host", detail)
}

impl RuntimeHost {
    /// `local` or `docker:NAME`, as `--runtime-host` takes it.
    pub fn parse(value: &str) -> Result<Option<String>, String> {
        match value.trim() {
            "" | "local" => Ok(None),
            v => match v.strip_prefix("docker:") {
                Some(name) if !name.is_empty() && !name.contains(char::is_whitespace) => {
                    Ok(Some(name.to_owned()))
                }
                _ => Err(format!(
                    "`{value}` is not a runtime host: `local`, or `docker:NAME` for a running \
                     container (ci/runtime-host.sh starts one)"
                )),
            },
        }
    }

    /// Connects to `value` (see [`RuntimeHost::parse`]): checks that the container runs, has a
    /// network of its own, and runs commands.
    pub async fn connect(value: &str) -> Result<RuntimeHost, RealError> {
        let Some(name) = RuntimeHost::parse(value).map_err(host_error)? else {
            return Ok(RuntimeHost::Local);
        };
        let cli = std::env::var("CONTAINER_CLI").unwrap_or_else(|_| "docker".to_owned());
        let out = Command::new(&cli)
            .args([
                "inspect",
                "-f",
                "{{.State.Running}} {{.HostConfig.NetworkMode}} {{range .NetworkSettings.Networks}}{{.IPAddress}} {{.Gateway}}{{end}}",
                &name,
            ])
            .output()
            .await
            .map_err(super::io(format!("running `{cli} inspect {name}`")))?;
        if !out.status.success() {
            return Err(host_error(format!(
                "`{cli} inspect {name}`: {} (start the host with ci/runtime-host.sh start {name})",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let fields: Vec<&str> = text.split_whitespace().collect();
        let (running, mode) = (fields.first().copied(), fields.get(1).copied());
        if running != Some("true") {
            return Err(host_error(format!("container `{name}` is not running")));
        }
        if matches!(mode, Some("host") | Some("none"))
            || mode.is_some_and(|m| m.starts_with("container:"))
        {
            return Err(host_error(format!(
                "container `{name}` has network mode `{}`: a second host needs a network of its \
                 own (a bridge network)",
                mode.unwrap_or_default()
            )));
        }
        let ip = |i: usize, what: &str| -> Result<IpAddr, RealError> {
            fields
                .get(i)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| host_error(format!("container `{name}` has no {what}: {text}")))
        };
        let container = Container {
            address: ip(2, "IP address")?,
            gateway: ip(3, "gateway")?,
            cli,
            name,
        };
        let host = RuntimeHost::Container(Arc::new(container));
        host.run_checked(
            "running `env` on the host",
            &["env", "-i", "sh", "-c", "exit 0"],
            None,
        )
        .await?;
        Ok(host)
    }

    /// `local` or `docker:NAME`.
    pub fn describe(&self) -> String {
        match self {
            RuntimeHost::Local => "local".to_owned(),
            RuntimeHost::Container(c) => format!("docker:{} at {}", c.name, c.address),
        }
    }

    /// Whether the runtimes run on a second host.
    pub fn is_remote(&self) -> bool {
        matches!(self, RuntimeHost::Container(_))
    }

    /// The command that runs `program args` on the host with exactly `env` (and a `PATH`) in
    /// `cwd`. Its stdio is the caller's to set.
    pub fn command(
        &self,
        program: &Path,
        args: &[&str],
        env: &[(String, String)],
        cwd: &Path,
    ) -> Command {
        match self {
            RuntimeHost::Local => {
                let mut command = Command::new(program);
                command
                    .args(args)
                    .env_clear()
                    .env("PATH", std::env::var("PATH").unwrap_or_default())
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .current_dir(cwd);
                command
            }
            RuntimeHost::Container(c) => c.command(&[], program, args, env, cwd),
        }
    }

    /// [`RuntimeHost::command`] for a server that must end with its client: on a second host,
    /// where ending the `docker exec` client would leave the program running, the program is
    /// stopped when its stdin (which the caller must pipe and keep) closes.
    pub fn server_command(
        &self,
        program: &Path,
        args: &[&str],
        env: &[(String, String)],
        cwd: &Path,
    ) -> Command {
        match self {
            RuntimeHost::Local => self.command(program, args, env, cwd),
            RuntimeHost::Container(c) => c.command(
                &[
                    "sh",
                    "-c",
                    "\"$@\" </dev/null & p=$!; cat >/dev/null; kill $p 2>/dev/null; wait $p",
                    "sh",
                ],
                program,
                args,
                env,
                cwd,
            ),
        }
    }

    /// The command prefix that runs a program on the host (for the journaling proxies), when
    /// the host is a second one.
    pub fn exec_prefix(&self) -> Option<Vec<String>> {
        match self {
            RuntimeHost::Local => None,
            RuntimeHost::Container(c) => Some(
                std::iter::once(c.cli.clone())
                    .chain(c.exec_prefix())
                    .collect(),
            ),
        }
    }

    /// The variables a journaling proxy needs to start its real program on this host with the
    /// environment `runtime_env` (empty when the host is this machine).
    pub fn proxy_env(&self, runtime_env: &[(String, String)]) -> Vec<(String, String)> {
        let Some(prefix) = self.exec_prefix() else {
            return Vec::new();
        };
        let keys: Vec<&str> = runtime_env.iter().map(|(k, _)| k.as_str()).collect();
        vec![
            (
                EXEC_ENV.to_owned(),
                serde_json::Value::from(prefix).to_string(),
            ),
            (EXEC_VARS_ENV.to_owned(), keys.join(",")),
        ]
    }

    /// Makes `dirs` here and, on a second host, there too.
    pub async fn make_dirs(&self, dirs: &[&Path]) -> Result<(), RealError> {
        for dir in dirs {
            std::fs::create_dir_all(dir)
                .map_err(super::io(format!("creating {}", dir.display())))?;
        }
        if self.is_remote() && !dirs.is_empty() {
            let mut argv = vec!["mkdir".to_owned(), "-p".to_owned(), "--".to_owned()];
            argv.extend(dirs.iter().map(|d| d.display().to_string()));
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            self.run_checked("making the scenario's directories on the host", &argv, None)
                .await?;
        }
        Ok(())
    }

    /// Removes `dir` on a second host, in the background (nothing here: the scenario's own
    /// directory is removed with it).
    pub fn forget_dir(&self, dir: &Path) {
        if let RuntimeHost::Container(c) = self {
            let spawned = std::process::Command::new(&c.cli)
                .args(["exec", &c.name, "rm", "-rf", "--"])
                .arg(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            if let Ok(mut child) = spawned {
                std::thread::spawn(move || {
                    let _ = child.wait();
                });
            }
        }
    }

    /// Writes `contents` to `path` on the host.
    pub async fn write_file(&self, path: &Path, contents: &str) -> Result<(), RealError> {
        match self {
            RuntimeHost::Local => std::fs::write(path, contents)
                .map_err(super::io(format!("writing {}", path.display()))),
            RuntimeHost::Container(_) => {
                let target = path.display().to_string();
                self.run_checked(
                    &format!("writing {target} on the host"),
                    &["sh", "-c", "cat > \"$1\"", "sh", &target],
                    Some(contents.as_bytes()),
                )
                .await
                .map(|_| ())
            }
        }
    }

    /// The contents of `path` on the host; `None` when there is no such file.
    pub async fn read_file(&self, path: &Path) -> Result<Option<String>, RealError> {
        match self {
            RuntimeHost::Local => match std::fs::read_to_string(path) {
                Ok(text) => Ok(Some(text)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(super::io(format!("reading {}", path.display()))(e)),
            },
            RuntimeHost::Container(_) => {
                let target = path.display().to_string();
                let out = self
                    .run(
                        &[
                            "sh",
                            "-c",
                            "test -f \"$1\" || exit 3; cat \"$1\"",
                            "sh",
                            &target,
                        ],
                        None,
                    )
                    .await?;
                match out.status.code() {
                    Some(0) => Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned())),
                    Some(3) => Ok(None),
                    _ => Err(host_error(format!(
                        "reading {target} on the host: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))),
                }
            }
        }
    }

    /// Whether `program` is an executable file on the host.
    pub async fn has_program(&self, program: &Path) -> Result<bool, RealError> {
        match self {
            RuntimeHost::Local => Ok(program.is_file()),
            RuntimeHost::Container(_) => {
                let target = program.display().to_string();
                let out = self
                    .run(&["sh", "-c", "test -x \"$1\"", "sh", &target], None)
                    .await?;
                Ok(out.status.success())
            }
        }
    }

    /// The process ids on the host whose environment holds `variable` (`KEY=VALUE`) exactly.
    pub async fn processes_with(&self, variable: &str) -> Result<Vec<u32>, RealError> {
        match self {
            RuntimeHost::Local => {
                let wanted = variable.as_bytes();
                let mut pids = Vec::new();
                for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                    let Some(pid) = entry
                        .file_name()
                        .to_str()
                        .and_then(|n| n.parse::<u32>().ok())
                    else {
                        continue;
                    };
                    if let Ok(environ) = std::fs::read(entry.path().join("environ")) {
                        if environ.split(|b| *b == 0).any(|var| var == wanted) {
                            pids.push(pid);
                        }
                    }
                }
                Ok(pids)
            }
            RuntimeHost::Container(_) => {
                let script = "for e in /proc/[0-9]*/environ; do \
                     tr '\\0' '\\n' < \"$e\" 2>/dev/null | grep -qxF -- \"$1\" && \
                     { p=${e#/proc/}; echo \"${p%/environ}\"; }; done; true";
                let out = self
                    .run_checked(
                        "listing the host's processes",
                        &["sh", "-c", script, "sh", variable],
                        None,
                    )
                    .await?;
                Ok(out.lines().filter_map(|l| l.trim().parse().ok()).collect())
            }
        }
    }

    /// The address the fake model APIs listen on: loopback here, the address a second host
    /// reaches this machine at.
    pub fn model_address(&self) -> IpAddr {
        match self {
            RuntimeHost::Local => IpAddr::from([127, 0, 0, 1]),
            RuntimeHost::Container(c) => c.gateway,
        }
    }

    /// The address a server on the host listens on (`--hostname`), and the one the harness
    /// reaches it at.
    pub fn server_addresses(&self) -> (String, String) {
        match self {
            RuntimeHost::Local => ("127.0.0.1".to_owned(), "127.0.0.1".to_owned()),
            RuntimeHost::Container(c) => ("0.0.0.0".to_owned(), c.address.to_string()),
        }
    }

    /// Runs `argv` on the host (a second one; here it is run directly) with `stdin`, within the
    /// file limit.
    async fn run(
        &self,
        argv: &[&str],
        stdin: Option<&[u8]>,
    ) -> Result<std::process::Output, RealError> {
        let mut command = match self {
            RuntimeHost::Local => {
                let mut c = Command::new(argv[0]);
                c.args(&argv[1..]);
                c
            }
            RuntimeHost::Container(c) => {
                let mut command = Command::new(&c.cli);
                command.args(c.exec_prefix()).args(argv);
                command
            }
        };
        let mut child = command
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(super::io(format!("starting {argv:?} on the runtime host")))?;
        if let (Some(bytes), Some(mut input)) = (stdin, child.stdin.take()) {
            input
                .write_all(bytes)
                .await
                .map_err(super::io("writing to the runtime host"))?;
        }
        tokio::time::timeout(FILE_LIMIT, child.wait_with_output())
            .await
            .map_err(|_| {
                host_error(format!(
                    "{argv:?} did not finish within {} s",
                    FILE_LIMIT.as_secs()
                ))
            })?
            .map_err(super::io(format!("running {argv:?} on the runtime host")))
    }

    /// [`RuntimeHost::run`], failing unless it exits 0; its stdout.
    async fn run_checked(
        &self,
        what: &str,
        argv: &[&str],
        stdin: Option<&[u8]>,
    ) -> Result<String, RealError> {
        let out = self.run(argv, stdin).await?;
        if !out.status.success() {
            return Err(host_error(format!(
                "{what}: {argv:?} exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Container {
    /// `exec -i NAME`.
    fn exec_prefix(&self) -> [String; 3] {
        ["exec".to_owned(), "-i".to_owned(), self.name.clone()]
    }

    /// `program args` in the container, after `wrapper`, with exactly `env` in `cwd`.
    fn command(
        &self,
        wrapper: &[&str],
        program: &Path,
        args: &[&str],
        env: &[(String, String)],
        cwd: &Path,
    ) -> Command {
        let mut command = Command::new(&self.cli);
        command
            .args(self.exec_prefix())
            .args(wrapper)
            .args(remote_env(env, cwd))
            .arg(program)
            .args(args);
        command
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_host_values_are_local_or_a_named_container() {
        assert_eq!(RuntimeHost::parse("local"), Ok(None));
        assert_eq!(RuntimeHost::parse(""), Ok(None));
        assert_eq!(RuntimeHost::parse("docker:box"), Ok(Some("box".to_owned())));
        for bad in ["docker:", "ssh:box", "box", "docker:a b"] {
            let error = RuntimeHost::parse(bad).unwrap_err();
            assert!(
                error.contains(bad) && error.contains("docker:NAME"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_program_on_a_second_host_gets_exactly_its_environment_and_directory() {
        let argv = remote_env(
            &[
                ("CODEX_HOME".into(), "/s/codex".into()),
                ("PATH".into(), "/elsewhere".into()),
            ],
            Path::new("/s/home"),
        );
        assert_eq!(
            argv[4..],
            [
                "/s/home",
                "/",
                "env",
                "-i",
                "PATH=/usr/local/bin:/usr/bin:/bin",
                "CODEX_HOME=/s/codex"
            ]
        );
        assert_eq!(argv[..2], ["sh", "-c"]);
    }
}

//! A WebDriver driver for Debian's headless Chromium, through `chromedriver`.
//!
//! [`BrowserPrograms::locate`] finds the two programs, [`Browser::start`] runs one `chromedriver`
//! on a free loopback port and opens one headless Chromium session in a fresh profile, and the
//! methods of [`Browser`] navigate, run scripts, wait for conditions, take screenshots and read
//! back everything the page's origin stored ([`StoredState`]), for the leak scan.
//!
//! Why WebDriver through `chromedriver` rather than the DevTools protocol directly: the WebDriver
//! client (`fantoccini`, plain HTTP to loopback, no TLS stack) builds in about a third of the time
//! `chromiumoxide` does on the machines this harness runs on (31 s against 84 s from scratch),
//! and WebDriver covers everything the browser tier needs: navigation, synchronous and
//! asynchronous scripts, screenshots.
//!
//! The network is not controlled here. Chromium is started with its background networking
//! switched off (no component updates, no sync, no QUIC, no first-run fetches), so the only
//! traffic it makes is what the page makes; what that traffic reaches, and how it fails, is the
//! business of the harness's gateway, which serves the client and stands between it and the
//! implementation under test.
//!
//! Processes: `chromedriver` runs in its own process group, and Chromium (its child) in that
//! group too. [`Browser::close`] ends the session and kills the group; dropping a [`Browser`]
//! without closing it (a panicking scenario) kills the group as well, so no process is left
//! behind. A harness killed with SIGKILL cannot do this.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde_json::Value;

/// How long `chromedriver` may take to answer `/status` as ready.
const DRIVER_READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long creating the WebDriver session (starting Chromium) may take.
const SESSION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long ending the session may take before the processes are killed anyway.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// The WebDriver page load timeout: how long [`Browser::goto`] waits for a page.
const PAGE_LOAD_TIMEOUT_MS: u64 = 60_000;
/// The WebDriver script timeout: how long a script (and an asynchronous script's callback) may take.
const SCRIPT_TIMEOUT_MS: u64 = 30_000;
/// How often [`Browser::wait_for`] evaluates its expression.
const POLL_INTERVAL: Duration = Duration::from_millis(25);
/// How much of `chromedriver`'s log an error quotes.
const LOG_TAIL_BYTES: usize = 4000;

/// The switches Chromium runs with (besides the profile directory).
const CHROMIUM_ARGS: [&str; 11] = [
    "--headless=new",
    // The harness runs as root on its machines; Chromium refuses to sandbox as root.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    // The network is closed: nothing but the page may talk to it.
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--window-size=1024,900",
];

/// Where Chromium and chromedriver are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserPrograms {
    /// The Chromium executable (Debian's `/usr/bin/chromium` is a launcher script; that is fine).
    pub chromium: PathBuf,
    /// The `chromedriver` executable matching that Chromium.
    pub chromedriver: PathBuf,
}

impl BrowserPrograms {
    /// From REWIND_CHROMIUM / REWIND_CHROMEDRIVER, else /usr/bin/chromium and /usr/bin/chromedriver;
    /// a clear error naming the missing path and how to install (`apt-get install -y chromium
    /// chromium-driver` on Debian) when one is not an executable file.
    pub fn locate() -> anyhow::Result<BrowserPrograms> {
        let chromium = program_path("REWIND_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = program_path("REWIND_CHROMEDRIVER", "/usr/bin/chromedriver");
        check_executable(&chromium, "Chromium", "REWIND_CHROMIUM")?;
        check_executable(&chromedriver, "chromedriver", "REWIND_CHROMEDRIVER")?;
        Ok(BrowserPrograms {
            chromium,
            chromedriver,
        })
    }

    /// `chromium --version` and `chromedriver --version` output lines (for reports).
    pub async fn versions(&self) -> anyhow::Result<(String, String)> {
        let chromium = version_line(&self.chromium).await?;
        let chromedriver = version_line(&self.chromedriver).await?;
        Ok((chromium, chromedriver))
    }
}

/// The path in `var` when it is set and not empty, else `default`.
fn program_path(var: &str, default: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => PathBuf::from(default),
    }
}

fn check_executable(path: &Path, what: &str, var: &str) -> anyhow::Result<()> {
    let problem = match std::fs::metadata(path) {
        Err(e) => Some(format!("cannot be read ({e})")),
        Ok(meta) if !meta.is_file() => Some("is not a file".to_owned()),
        Ok(meta) if meta.permissions().mode() & 0o111 == 0 => Some("is not executable".to_owned()),
        Ok(_) => None,
    };
    match problem {
        None => Ok(()),
        Some(problem) => bail!(
            "{what} not found: {} {problem}; the browser tier needs Chromium and chromedriver \
             (on Debian: `apt-get install -y chromium chromium-driver`), or set {var} to the \
             executable",
            path.display()
        ),
    }
}

/// The first line `program --version` prints on its standard output.
async fn version_line(program: &Path) -> anyhow::Result<String> {
    let mut command = tokio::process::Command::new(program);
    command
        .arg("--version")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(20), command.output())
        .await
        .map_err(|_| anyhow!("`{} --version` took over 20 s", program.display()))?
        .with_context(|| format!("running `{} --version`", program.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().map(str::trim).find(|l| !l.is_empty());
    match line {
        Some(line) if output.status.success() => Ok(line.to_owned()),
        _ => bail!(
            "`{} --version` failed ({}): {}",
            program.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    }
}

/// One chromedriver process and one headless Chromium session in a fresh profile.
pub struct Browser {
    client: fantoccini::Client,
    /// `chromedriver`, leader of its own process group (Chromium runs in that group too);
    /// `None` once [`Browser::close`] has reaped it.
    driver: Option<tokio::process::Child>,
    /// The process group to kill: `chromedriver`'s pid.
    group: Option<libc::pid_t>,
    /// `chromedriver`'s standard output and error.
    log: PathBuf,
    /// Holds the Chromium profile and the log; removed when the browser goes.
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("group", &self.group)
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// Starts `chromedriver` on a free loopback port, waits until it is ready (20 s), then
    /// opens a session (30 s): headless Chromium at `programs.chromium`, in a fresh profile
    /// directory that goes away with the browser.
    pub async fn start(programs: &BrowserPrograms) -> anyhow::Result<Browser> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("rewind-browser-{}-", std::process::id()))
            .tempdir()
            .context("creating the browser's temporary directory")?;
        // Owned like every directory the harness makes: a run killed with SIGKILL leaves it,
        // and the next run removes it and kills the chromedriver listed in it.
        crate::leftovers::claim(dir.path()).context("claiming the browser's directory")?;
        let profile = dir.path().join("profile");
        std::fs::create_dir(&profile)
            .with_context(|| format!("creating the Chromium profile {}", profile.display()))?;
        let log = dir.path().join("chromedriver.log");
        let log_file = std::fs::File::create(&log)
            .with_context(|| format!("creating the chromedriver log {}", log.display()))?;
        let log_err = log_file
            .try_clone()
            .context("duplicating the chromedriver log handle")?;

        let port = free_port()?;
        let mut command = tokio::process::Command::new(&programs.chromedriver);
        command
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log_file))
            .stderr(Stdio::from(log_err))
            .process_group(0)
            .kill_on_drop(true);
        let driver = command.spawn().with_context(|| {
            format!(
                "starting chromedriver {} --port={port}",
                programs.chromedriver.display()
            )
        })?;
        if let Some(pid) = driver.id() {
            crate::leftovers::record_process(dir.path(), pid)
                .context("listing chromedriver in the browser's directory")?;
        }
        let group = driver.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
        // From here on, a failure drops `guard`, which kills the process group.
        let mut guard = DriverGuard {
            driver: Some(driver),
            group,
        };

        let base = format!("http://127.0.0.1:{port}");
        wait_ready(&base, &mut guard, &log).await?;

        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), Value::from("chrome"));
        capabilities.insert(
            "timeouts".into(),
            serde_json::json!({ "pageLoad": PAGE_LOAD_TIMEOUT_MS, "script": SCRIPT_TIMEOUT_MS }),
        );
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        capabilities.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": programs.chromium.to_string_lossy(),
                "args": args,
            }),
        );
        let mut builder = fantoccini::ClientBuilder::new(
            hyper_util::client::legacy::connect::HttpConnector::new(),
        );
        builder.capabilities(capabilities);
        let client = match tokio::time::timeout(SESSION_TIMEOUT, builder.connect(&base)).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => bail!(
                "creating the WebDriver session at {base} (Chromium {}) failed: {e}\n\
                 chromedriver log (tail):\n{}",
                programs.chromium.display(),
                log_tail(&log)
            ),
            Err(_) => bail!(
                "creating the WebDriver session at {base} (Chromium {}) took over {} s\n\
                 chromedriver log (tail):\n{}",
                programs.chromium.display(),
                SESSION_TIMEOUT.as_secs(),
                log_tail(&log)
            ),
        };

        Ok(Browser {
            client,
            driver: guard.driver.take(),
            group: guard.group.take(),
            log,
            _dir: dir,
        })
    }

    /// Navigates to `url` and waits for the page to load (WebDriver page load timeout: 60 s).
    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.client
            .goto(url)
            .await
            .with_context(|| format!("navigating the browser to {url}"))
    }

    /// Runs `script` as a function body with `arguments` (WebDriver execute/sync) and returns its JSON result.
    pub async fn eval(&self, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
        self.client
            .execute(script, args)
            .await
            .with_context(|| format!("running the script `{}`", script_head(script)))
    }

    /// Same, asynchronous script (the last argument is the callback) — WebDriver execute/async.
    /// The callback must be called within the script timeout (30 s).
    pub async fn eval_async(&self, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
        self.client
            .execute_async(script, args)
            .await
            .with_context(|| format!("running the asynchronous script `{}`", script_head(script)))
    }

    /// Polls `expression` (a JS expression, evaluated as `return (<expression>)`) every 25 ms until it is truthy; returns its value, or an error naming the expression and the timeout (include the last value seen).
    ///
    /// An evaluation that fails (the page is between documents, the expression throws) counts
    /// as not yet; the last such error is what the timeout error quotes when no value was seen
    /// after it.
    pub async fn wait_for(&self, expression: &str, timeout: Duration) -> anyhow::Result<Value> {
        let script = format!("return ({expression});");
        let started = Instant::now();
        loop {
            let last = match self.client.execute(&script, Vec::new()).await {
                Ok(value) if truthy(&value) => return Ok(value),
                Ok(value) => format!("the value {value}"),
                Err(e) => format!("the error: {e}"),
            };
            if started.elapsed() >= timeout {
                bail!(
                    "waited {} ms for `{expression}` to be truthy; last seen {last}",
                    timeout.as_millis()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// PNG bytes of the viewport.
    pub async fn screenshot(&self) -> anyhow::Result<Vec<u8>> {
        self.client
            .screenshot()
            .await
            .context("taking a screenshot of the browser's viewport")
    }

    /// `document.documentElement.outerHTML`.
    pub async fn dom(&self) -> anyhow::Result<String> {
        let value = self
            .eval("return document.documentElement.outerHTML;", Vec::new())
            .await
            .context("reading the page's DOM")?;
        match value {
            Value::String(html) => Ok(html),
            other => bail!("reading the page's DOM: outerHTML was not a string but {other}"),
        }
    }

    /// Everything the page's origin keeps: localStorage and sessionStorage entries, and every IndexedDB database (via `indexedDB.databases()`), every object store, every record (key and value as JSON text; values that JSON cannot serialize go through String()).
    ///
    /// Storage entries are sorted by key; databases by name, stores by name, records in key
    /// order. JSON renders binary values (`ArrayBuffer`, typed arrays, `Blob`) as `{}` or an
    /// index map, not as their bytes.
    pub async fn storage(&self) -> anyhow::Result<StoredState> {
        let value = self
            .client
            .execute_async(STORAGE_SCRIPT, Vec::new())
            .await
            .context(
                "reading the page origin's storage (localStorage, sessionStorage, IndexedDB)",
            )?;
        if let Some(error) = value.get("error") {
            bail!("reading the page origin's storage failed in the page: {error}");
        }
        let raw: RawStoredState = serde_json::from_value(value)
            .context("reading the page origin's storage: unexpected result shape")?;
        Ok(StoredState {
            local: raw.local,
            session: raw.session,
            indexed_db: raw.indexed_db,
        })
    }

    /// Ends the session and kills chromedriver (and its Chromium). Also done on Drop (kill_on_drop / best effort), so a panicking scenario leaves no process behind.
    pub async fn close(mut self) -> anyhow::Result<()> {
        let client = self.client.clone();
        let ended = tokio::time::timeout(CLOSE_TIMEOUT, client.close()).await;
        // Whatever the session did, the processes go.
        let group = self.group.take();
        if let Some(group) = group {
            kill_group(group);
        }
        if let Some(mut driver) = self.driver.take() {
            let _ = driver.start_kill();
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, driver.wait()).await;
        }
        if let Some(group) = group {
            // Let Chromium's processes go before the profile directory is removed.
            let deadline = Instant::now() + Duration::from_secs(2);
            while group_alive(group) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        match ended {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(anyhow!(e)).context("ending the WebDriver session"),
            Err(_) => bail!(
                "ending the WebDriver session took over {} s (the processes were killed)",
                CLOSE_TIMEOUT.as_secs()
            ),
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            kill_group(group);
        }
        // `kill_on_drop` kills chromedriver itself should the group kill have failed; tokio reaps it.
        self.driver.take();
    }
}

/// Kills `chromedriver`'s process group when startup fails half way.
struct DriverGuard {
    driver: Option<tokio::process::Child>,
    group: Option<libc::pid_t>,
}

impl Drop for DriverGuard {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            kill_group(group);
        }
        self.driver.take();
    }
}

fn kill_group(group: libc::pid_t) {
    if group > 1 {
        // SAFETY: `kill` has no memory effects; a group that is already gone is harmless.
        // The group leader (chromedriver) is not reaped before this runs, so the id is not reused.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}

/// Whether a live (not zombie) process is still in the process group `group`. Killed
/// Chromium helpers are reparented to init and stay zombies until it reaps them; those hold
/// nothing and do not count.
fn group_alive(group: libc::pid_t) -> bool {
    if group <= 1 {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        // No /proc to look at: whether the group exists at all (zombies included).
        // SAFETY: signal 0 only checks that the group exists; nothing is sent.
        return unsafe { libc::kill(-group, 0) } == 0;
    };
    entries.flatten().any(|entry| {
        let is_pid = entry
            .file_name()
            .to_str()
            .is_some_and(|name| !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()));
        is_pid
            && std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|stat| live_member(&stat, group))
                .unwrap_or(false)
    })
}

/// From a `/proc/<pid>/stat` line: whether the process is in `group` and not a zombie.
fn live_member(stat: &str, group: libc::pid_t) -> Option<bool> {
    // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let _ppid = fields.next()?;
    let pgrp: libc::pid_t = fields.next()?.parse().ok()?;
    Some(pgrp == group && state != "Z" && state != "X")
}

/// A loopback port nothing listens on now.
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .context("binding 127.0.0.1:0 to pick a port for chromedriver")?;
    let port = listener
        .local_addr()
        .context("reading the picked chromedriver port")?
        .port();
    Ok(port)
}

/// Polls `base/status` until chromedriver says it is ready.
async fn wait_ready(base: &str, guard: &mut DriverGuard, log: &Path) -> anyhow::Result<()> {
    let url = format!("{base}/status");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .no_proxy()
        .build()
        .context("building the HTTP client for chromedriver's /status")?;
    let started = Instant::now();
    loop {
        if let Some(driver) = guard.driver.as_mut() {
            if let Ok(Some(status)) = driver.try_wait() {
                bail!(
                    "chromedriver exited ({status}) before it was ready at {url}\n\
                     chromedriver log (tail):\n{}",
                    log_tail(log)
                );
            }
        }
        let last = match http.get(&url).send().await {
            Ok(response) => match response.json::<Value>().await {
                Ok(body) if body.pointer("/value/ready") == Some(&Value::Bool(true)) => {
                    return Ok(());
                }
                Ok(body) => format!("not ready: {body}"),
                Err(e) => format!("unreadable answer: {e}"),
            },
            Err(e) => format!("no answer: {e}"),
        };
        if started.elapsed() >= DRIVER_READY_TIMEOUT {
            bail!(
                "chromedriver was not ready at {url} within {} s (last: {last})\n\
                 chromedriver log (tail):\n{}",
                DRIVER_READY_TIMEOUT.as_secs(),
                log_tail(log)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The end of chromedriver's log, for errors.
fn log_tail(log: &Path) -> String {
    match std::fs::read(log) {
        Ok(bytes) => {
            let start = bytes.len().saturating_sub(LOG_TAIL_BYTES);
            let text = String::from_utf8_lossy(&bytes[start..]);
            let text = text.trim();
            if text.is_empty() {
                "(empty)".to_owned()
            } else {
                text.to_owned()
            }
        }
        Err(e) => format!("(cannot read {}: {e})", log.display()),
    }
}

/// The first 80 characters of a script, on one line, for error messages.
fn script_head(script: &str) -> String {
    let flat: String = script
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut head: String = flat.chars().take(80).collect();
    if flat.chars().count() > 80 {
        head.push('…');
    }
    head
}

/// JavaScript truthiness of a value WebDriver returned (NaN and undefined arrive as null).
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// Reads localStorage, sessionStorage and every IndexedDB record of the page's origin; calls
/// back with `{local, session, indexed_db}` or `{error}`.
const STORAGE_SCRIPT: &str = r#"
const done = arguments[arguments.length - 1];
const json = (v) => {
  try {
    const s = JSON.stringify(v);
    if (typeof s === "string") return s;
  } catch (e) {}
  try { return String(v); } catch (e) { return Object.prototype.toString.call(v); }
};
const entries = (storage) => {
  const out = [];
  for (let i = 0; i < storage.length; i++) {
    const k = storage.key(i);
    if (k !== null) out.push([k, String(storage.getItem(k))]);
  }
  out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return out;
};
const request = (r) => new Promise((resolve, reject) => {
  r.onsuccess = () => resolve(r.result);
  r.onerror = () => reject(r.error);
});
const openDb = (name) => new Promise((resolve, reject) => {
  const r = indexedDB.open(name);
  let created = false;
  // The database went away since it was listed: do not create it.
  r.onupgradeneeded = () => { created = true; r.transaction.abort(); };
  r.onsuccess = () => resolve(r.result);
  r.onerror = () => (created ? resolve(null) : reject(r.error));
  r.onblocked = () => reject(new Error("opening IndexedDB database " + name + " is blocked"));
});
const readStore = (db, store) => new Promise((resolve, reject) => {
  const out = [];
  const tx = db.transaction(store, "readonly");
  const cursor = tx.objectStore(store).openCursor();
  cursor.onsuccess = () => {
    const c = cursor.result;
    if (c) { out.push([db.name, store, json(c.key), json(c.value)]); c.continue(); }
    else resolve(out);
  };
  cursor.onerror = () => reject(cursor.error);
  tx.onabort = () => reject(tx.error || new Error("transaction aborted"));
});
(async () => {
  const local = entries(window.localStorage);
  const session = entries(window.sessionStorage);
  const indexed_db = [];
  const infos = await indexedDB.databases();
  const names = infos.map((i) => i.name).filter((n) => typeof n === "string").sort();
  for (const name of names) {
    const db = await openDb(name);
    if (db === null) continue;
    try {
      const stores = Array.from(db.objectStoreNames).sort();
      for (const store of stores) indexed_db.push(...(await readStore(db, store)));
    } finally {
      db.close();
    }
  }
  return { local, session, indexed_db };
})().then(done, (e) => done({ error: String((e && (e.stack || e.message)) || e) }));
"#;

#[derive(serde::Deserialize)]
struct RawStoredState {
    local: Vec<(String, String)>,
    session: Vec<(String, String)>,
    indexed_db: Vec<(String, String, String, String)>,
}

/// Everything a page's origin keeps in the browser, as [`Browser::storage`] read it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StoredState {
    /// localStorage entries (key, value), sorted by key.
    pub local: Vec<(String, String)>,
    /// sessionStorage entries (key, value), sorted by key.
    pub session: Vec<(String, String)>,
    /// (database, store, key JSON, value JSON)
    pub indexed_db: Vec<(String, String, String, String)>,
}

impl StoredState {
    /// every text in it, for a leak scan: keys and values (and IndexedDB database and store names)
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        let storage = self
            .local
            .iter()
            .chain(self.session.iter())
            .flat_map(|(k, v)| [k.as_str(), v.as_str()]);
        let indexed = self
            .indexed_db
            .iter()
            .flat_map(|(db, store, k, v)| [db.as_str(), store.as_str(), k.as_str(), v.as_str()]);
        storage.chain(indexed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>canary page</title></head>
<body><p id="text">rewind browser canary page</p>
<script>
localStorage.setItem("k", "v-canary");
sessionStorage.setItem("s", "s-canary");
const open = indexedDB.open("canary-db", 1);
open.onupgradeneeded = () => open.result.createObjectStore("records");
open.onerror = () => { document.body.dataset.ready = "error: " + open.error; };
open.onsuccess = () => {
  const db = open.result;
  const tx = db.transaction("records", "readwrite");
  tx.objectStore("records").put({ text: "idb-canary", n: 1 }, "record-1");
  tx.oncomplete = () => { db.close(); document.body.dataset.ready = "1"; };
  tx.onerror = () => { document.body.dataset.ready = "error: " + tx.error; };
};
</script></body></html>"#;

    #[tokio::test]
    async fn drives_chromium_and_reads_back_storage() {
        let programs = match BrowserPrograms::locate() {
            Ok(programs) => programs,
            Err(e) => {
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!("CI=true and no browser: {e:#}");
                }
                eprintln!("skipping the browser test: {e:#}");
                return;
            }
        };
        let (chromium, chromedriver) = programs.versions().await.expect("versions");
        eprintln!("chromium: {chromium}\nchromedriver: {chromedriver}");

        let app = axum::Router::new().route(
            "/",
            axum::routing::get(|| async { axum::response::Html(PAGE) }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(async move { axum::serve(listener, app).await });

        let started = Instant::now();
        let browser = Browser::start(&programs).await.expect("start the browser");
        eprintln!("Browser::start took {} ms", started.elapsed().as_millis());

        let url = format!("http://{addr}/");
        let started = Instant::now();
        browser.goto(&url).await.expect("goto");
        eprintln!("goto took {} ms", started.elapsed().as_millis());
        let ready = browser
            .wait_for(
                "document.body.dataset.ready === '1'",
                Duration::from_secs(10),
            )
            .await
            .expect("page ready");
        assert_eq!(ready, Value::Bool(true));

        let mut round_trips = Vec::new();
        for n in 0..20_i64 {
            let started = Instant::now();
            let sum = browser
                .eval(
                    "return arguments[0] + arguments[1];",
                    vec![n.into(), 3.into()],
                )
                .await
                .expect("eval");
            round_trips.push(started.elapsed());
            assert_eq!(sum, Value::from(n + 3));
        }
        let first = round_trips[0];
        round_trips.sort();
        eprintln!(
            "eval round trip: first {} µs, median {} µs, min {} µs (20 runs)",
            first.as_micros(),
            round_trips[10].as_micros(),
            round_trips[0].as_micros()
        );

        let later = browser
            .eval_async(
                "const done = arguments[arguments.length - 1]; setTimeout(() => done(arguments[0] * 2), 10);",
                vec![21.into()],
            )
            .await
            .expect("eval_async");
        assert_eq!(later, Value::from(42));

        let timeout = browser
            .wait_for("window.neverSet", Duration::from_millis(100))
            .await
            .expect_err("wait_for must time out");
        let message = format!("{timeout:#}");
        assert!(message.contains("window.neverSet"), "{message}");
        assert!(message.contains("null"), "{message}");

        let started = Instant::now();
        let stored = browser.storage().await.expect("storage");
        eprintln!(
            "storage() took {} ms: {stored:?}",
            started.elapsed().as_millis()
        );
        assert!(stored
            .local
            .contains(&("k".to_owned(), "v-canary".to_owned())));
        assert!(stored
            .session
            .contains(&("s".to_owned(), "s-canary".to_owned())));
        assert!(stored
            .indexed_db
            .iter()
            .any(|(db, store, key, value)| db == "canary-db"
                && store == "records"
                && key == "\"record-1\""
                && value.contains("idb-canary")));
        for canary in ["v-canary", "s-canary", "idb-canary"] {
            assert!(
                stored.texts().any(|t| t.contains(canary)),
                "{canary} not found"
            );
        }

        let dom = browser.dom().await.expect("dom");
        assert!(dom.contains("rewind browser canary page"), "{dom}");

        let png = browser.screenshot().await.expect("screenshot");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");

        let group = browser.group.expect("process group");
        let started = Instant::now();
        browser.close().await.expect("close");
        eprintln!("close took {} ms", started.elapsed().as_millis());
        assert!(
            !group_alive(group),
            "chromedriver's process group outlived close()"
        );
        server.abort();
    }
}

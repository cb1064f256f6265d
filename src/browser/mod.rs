//! The browser client tier: a browser client running in a real Chromium against a gateway the
//! harness serves, with the network between them under the harness's control.
//!
//! - [`gateway`]: the server the page talks to (the browser API of `protocol/CLIENT.md`), which
//!   answers from the implementation under test and holds, drops, duplicates and reorders
//!   traffic on the scenario's say.
//! - [`chrome`]: Debian's headless Chromium, driven over WebDriver.
//! - [`ClientSession`]: one scenario's page: the gateway, the browser, what the page shows, and
//!   the screenshots and DOM saved as run artifacts.
//!
//! The client under test is an ES module (`mount(root, config)`); the reference client
//! (`client/rewind-client.js`) is built in, another is given with `--client-module`.

pub mod chrome;
pub mod gateway;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;

use chrome::{Browser, BrowserPrograms, StoredState};
use gateway::{ClientModule, Gateway, GatewayConfig};

/// The reference browser client, built into the harness.
pub const REFERENCE_CLIENT: &str = include_str!("../../client/rewind-client.js");

/// How long the page may take to mount the client.
const MOUNT_LIMIT: Duration = Duration::from_secs(20);
/// How long the page must stay quiet to count as settled.
pub const QUIET: Duration = Duration::from_millis(300);
/// How long a page may take to settle.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(15);

/// What the run's client scenarios share: the browser programs, the client under test, and
/// where artifacts go.
#[derive(Debug, Clone)]
pub struct ClientSetup {
    /// Chromium and chromedriver.
    pub programs: BrowserPrograms,
    /// The client under test.
    pub module: ClientModule,
    /// How the client was given, for reports (`reference`, a path, a URL).
    pub module_origin: String,
    /// Where screenshots and DOM dumps go (`<report-dir>/client`), if anywhere.
    pub artifacts: Option<PathBuf>,
}

impl ClientSetup {
    /// The setup for `module` (`None`: the reference client; a path to a file; an `http(s)://`
    /// URL the page imports).
    pub fn new(module: Option<&str>, artifacts: Option<PathBuf>) -> anyhow::Result<ClientSetup> {
        let programs = BrowserPrograms::locate()?;
        let (module, module_origin) = match module {
            None => (
                ClientModule::Served(Arc::from(REFERENCE_CLIENT)),
                "the reference client (client/rewind-client.js)".to_owned(),
            ),
            Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
                (ClientModule::Url(url.to_owned()), url.to_owned())
            }
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!("`--client-module {path}`: cannot read the client module")
                })?;
                (ClientModule::Served(Arc::from(text)), path.to_owned())
            }
        };
        Ok(ClientSetup {
            programs,
            module,
            module_origin,
            artifacts,
        })
    }
}

/// What the page shows, read from its `data-rewind-*` attributes (`protocol/CLIENT.md`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct Shown {
    /// The conversation's messages, in order: (id, text).
    pub messages: Vec<(String, String)>,
    /// The search results.
    pub search: Vec<(String, String)>,
    /// The share cards.
    #[serde(rename = "shareCards")]
    pub share_cards: Vec<(String, String)>,
    /// The unread count as shown (`None`: not shown).
    pub unread: Option<String>,
    /// The id of the summary's last message (`None` or empty: none).
    pub summary: Option<String>,
    /// The page's own script errors.
    pub errors: Vec<String>,
}

impl Shown {
    /// The ids of the conversation's messages.
    pub fn message_ids(&self) -> Vec<&str> {
        self.messages.iter().map(|m| m.0.as_str()).collect()
    }
}

/// Reads [`Shown`] off the page.
const SHOWN_SCRIPT: &str = r#"
const list = (name) => [...document.querySelectorAll(`[data-rewind-list="${name}"] [data-message-id]`)]
  .map((e) => [e.dataset.messageId, e.textContent]);
const unread = document.querySelector("[data-rewind-unread]");
const summary = document.querySelector("[data-rewind-summary]");
return {
  messages: list("messages"),
  search: list("search"),
  shareCards: list("share-cards"),
  unread: unread ? unread.textContent.trim() : null,
  summary: summary ? (summary.dataset.lastMessageId || null) : null,
  errors: (window.__rewind && window.__rewind.errors) || [],
};
"#;

/// One scenario's page.
pub struct ClientSession {
    /// The server side of the page.
    pub gateway: Gateway,
    /// The browser.
    pub browser: Browser,
    /// Where this scenario's artifacts go, if anywhere.
    artifacts: Option<PathBuf>,
    /// How many screenshots were saved (they are numbered in order).
    saved: usize,
}

impl ClientSession {
    /// Starts the gateway for `config` and a browser, without opening the page yet (the
    /// scenario may first set network rules).
    pub async fn start(
        setup: &ClientSetup,
        config: GatewayConfig,
        artifacts: Option<PathBuf>,
    ) -> anyhow::Result<ClientSession> {
        if let Some(dir) = &artifacts {
            // A directory left by an earlier run of the same scenario.
            if dir.exists() {
                std::fs::remove_dir_all(dir)
                    .with_context(|| format!("clearing `{}`", dir.display()))?;
            }
        }
        let gateway = Gateway::start(config)
            .await
            .context("starting the gateway")?;
        let browser = Browser::start(&setup.programs).await?;
        Ok(ClientSession {
            gateway,
            browser,
            artifacts,
            saved: 0,
        })
    }

    /// Opens the page and waits until the client has mounted and the network is quiet.
    pub async fn open(&mut self) -> anyhow::Result<()> {
        self.browser.goto(&self.gateway.url()).await?;
        let mounted = self
            .browser
            .wait_for(
                "document.body && document.body.dataset.mounted",
                MOUNT_LIMIT,
            )
            .await?;
        if mounted.as_str() != Some("1") {
            let shown = self.shown().await.unwrap_or_default();
            anyhow::bail!("the client did not mount: {}", shown.errors.join("; "));
        }
        self.settle().await
    }

    /// Waits until the page is quiet.
    pub async fn settle(&self) -> anyhow::Result<()> {
        self.gateway.settle(QUIET, SETTLE_LIMIT).await
    }

    /// What the page shows now.
    pub async fn shown(&self) -> anyhow::Result<Shown> {
        let value = self.browser.eval(SHOWN_SCRIPT, Vec::new()).await?;
        serde_json::from_value(value).context("reading what the page shows")
    }

    /// What the page's origin keeps (local and session storage, IndexedDB).
    pub async fn storage(&self) -> anyhow::Result<StoredState> {
        self.browser.storage().await
    }

    /// Saves a screenshot named `name` (numbered in order) under the artifacts directory.
    pub async fn save_screenshot(&mut self, name: &str) -> anyhow::Result<()> {
        let Some(dir) = self.artifacts.clone() else {
            return Ok(());
        };
        self.saved += 1;
        let png = self.browser.screenshot().await?;
        write_artifact(&dir, &format!("{:02}-{name}.png", self.saved), &png)
    }

    /// Ends the session; when the scenario failed, first saves the page's DOM and a screenshot.
    pub async fn finish(mut self, passed: bool) -> anyhow::Result<()> {
        if !passed {
            if let Some(dir) = self.artifacts.clone() {
                if let Ok(dom) = self.browser.dom().await {
                    write_artifact(&dir, "failure-dom.html", dom.as_bytes())?;
                }
                self.save_screenshot("failure").await?;
                let journal = gateway::describe(&self.gateway.journal());
                write_artifact(&dir, "failure-network.txt", journal.as_bytes())?;
            }
        }
        self.browser.close().await
    }
}

fn write_artifact(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the artifacts directory `{}`", dir.display()))?;
    let path = dir.join(name);
    std::fs::write(&path, bytes).with_context(|| format!("writing `{}`", path.display()))
}

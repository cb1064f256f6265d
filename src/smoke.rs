//! `rewind-conformance smoke`: checks in seconds that a server speaks driver protocol v1 before
//! a full run: handshake, attach to a freshly seeded database, one trivial rewind, the events
//! it published, detach. Each check prints what it saw, and what is wrong when it fails.

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use rewind_conformance::fixtures::{parse_fixture, seed_fixture};
use rewind_conformance::mocks::{MockPrograms, MockRuntimes};
use rewind_conformance::postgres::{PostgresChoice, PostgresServer, TemplateDatabase};
use rewind_conformance::sut::{
    Actor, AttachRequest, ConversationApi, DatabaseTarget, Limits, RewindRequest, RewindResponse,
    SutError, SystemUnderTest,
};

/// The conversation of the trivial rewind: alice, bob, and alice's own last message.
const FIXTURE: &str = r#"
description: A DM between two humans whose last message is alice's own.
workspace: {id: ws-smoke, name: Smoke}
humans:
  - {id: alice, name: Alice}
  - {id: bob, name: Bob}
scopes:
  - id: dm-smoke
    kind: dm
    name: alice / bob
    members:
      - {human: alice, role: owner, last_read_seq: 3, last_read_global_seq: 3}
      - {human: bob, last_read_seq: 2, last_read_global_seq: 2}
    messages:
      - {id: smoke-1, human: alice, content: "hello bob CANARY-smoke-1"}
      - {id: smoke-2, human: bob, content: "hello alice CANARY-smoke-2"}
      - {id: smoke-3, human: alice, content: "wrong window, ignore CANARY-smoke-3"}
"#;

/// How a smoke check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmokeOutcome {
    /// Every check passed.
    Passed,
    /// The server speaks the protocol but a check of behaviour failed.
    Failed,
    /// The server answered outside the protocol.
    ProtocolViolation,
}

struct Checks {
    started: Instant,
    failed: bool,
    violation: bool,
}

impl Checks {
    fn ok(&self, what: &str, detail: impl std::fmt::Display) {
        println!(
            "  ok    {what:<10} {detail} ({} ms)",
            self.started.elapsed().as_millis()
        );
    }

    fn fail(&mut self, what: &str, detail: impl std::fmt::Display) {
        self.failed = true;
        println!("  FAIL  {what:<10} {detail}");
    }

    fn error(&mut self, what: &str, error: &SutError) {
        self.violation |= error.is_protocol_violation();
        self.fail(what, error);
    }
}

/// Runs the smoke checks against `sut`, on PostgreSQL obtained as `choice` says.
pub async fn smoke(
    sut: &dyn SystemUnderTest,
    choice: &PostgresChoice,
    limits: Limits,
) -> anyhow::Result<SmokeOutcome> {
    let mut checks = Checks {
        started: Instant::now(),
        failed: false,
        violation: false,
    };
    println!(
        "smoke checks of driver protocol v{}:",
        rewind_driver_protocol::VERSION
    );
    match sut.handshake().await {
        Ok(i) => checks.ok(
            "handshake",
            format!(
                "`{}` {} speaks {} v{}",
                i.name,
                i.version.unwrap_or_default(),
                rewind_driver_protocol::PROTOCOL,
                rewind_driver_protocol::VERSION
            ),
        ),
        Err(e @ SutError::Transport { .. }) => {
            checks.fail("handshake", &e);
            anyhow::bail!("nothing answers the handshake (is the server running?)");
        }
        Err(e) => {
            checks.error("handshake", &e);
            return Ok(outcome(&checks));
        }
    }
    let fixture = parse_fixture(Path::new("smoke.yaml"), FIXTURE).context("the smoke fixture")?;
    let server = PostgresServer::provision(choice).await?;
    let result = async {
        let template =
            TemplateDatabase::create(server.admin_url(), &rewind_reference::MIGRATOR).await?;
        let db = template.clone_for_scenario().await?;
        let pool = db
            .pool(2)
            .await
            .context("connecting to the smoke database")?;
        {
            let mut conn = pool.acquire().await.context("acquiring a connection")?;
            seed_fixture(&mut conn, &fixture).await.context("seeding")?;
        }
        let exe = std::env::current_exe().context("finding this program (the mock runtimes)")?;
        let programs = MockPrograms::link(&exe)?;
        let mut mocks = MockRuntimes::start(&programs, &fixture, None).await?;
        let request = AttachRequest {
            database: DatabaseTarget {
                url: db.url.clone(),
                name: db.name.clone(),
            },
            runtimes: mocks.endpoints(),
            limits,
        };
        match sut.attach(&request).await {
            Ok(api) => {
                checks.ok("attach", format!("to database `{}`", db.name));
                exercise(&mut checks, api.as_ref(), &pool).await;
                match api.detach().await {
                    Ok(()) => checks.ok("detach", "session closed"),
                    Err(e) => checks.error("detach", &e),
                }
            }
            Err(e) => checks.error("attach", &e),
        }
        mocks.stop().await;
        programs.remove();
        pool.close().await;
        template.drop_all().await?;
        anyhow::Ok(())
    }
    .await;
    server.shutdown().await;
    result?;
    Ok(outcome(&checks))
}

fn outcome(checks: &Checks) -> SmokeOutcome {
    if checks.violation {
        SmokeOutcome::ProtocolViolation
    } else if checks.failed {
        SmokeOutcome::Failed
    } else {
        SmokeOutcome::Passed
    }
}

async fn exercise(checks: &mut Checks, api: &dyn ConversationApi, pool: &sqlx::PgPool) {
    let request = RewindRequest {
        actor: Actor::Human("alice".to_owned()),
        scope_id: "dm-smoke".to_owned(),
        target_message_id: "smoke-3".to_owned(),
    };
    match api.rewind(&request).await {
        Ok(RewindResponse::Completed { operation_id, .. }) => {
            checks.ok("rewind", format!("completed as operation `{operation_id}`"))
        }
        Ok(RewindResponse::Refused { code, message, .. }) => checks.fail(
            "rewind",
            format!(
                "alice rewinding her own last message `smoke-3` in a DM without agents must \
                 complete, but it was refused: `{message}` (code `{code}`)"
            ),
        ),
        Err(e) => checks.error("rewind", &e),
    }
    let row: Result<Option<(String, serde_json::Value)>, _> =
        sqlx::query_as("SELECT content, metadata FROM scope_messages WHERE id = 'smoke-3'")
            .fetch_optional(pool)
            .await;
    match row {
        Ok(Some((content, metadata)))
            if content.is_empty()
                && metadata
                    .pointer("/messageRecall/status")
                    .and_then(|s| s.as_str())
                    == Some("rewound") =>
        {
            checks.ok("tombstone", "`smoke-3` is a rewound tombstone")
        }
        Ok(Some((content, metadata))) => checks.fail(
            "tombstone",
            format!(
                "`scope_messages` row `smoke-3` should have content '' and \
                 metadata.messageRecall.status \"rewound\", but has content {content:?} and \
                 metadata {metadata} (is the server using the database it was attached to?)"
            ),
        ),
        Ok(None) => checks.fail(
            "tombstone",
            "`scope_messages` row `smoke-3` is gone: a rewind tombstones, never deletes",
        ),
        Err(e) => checks.fail("tombstone", format!("cannot read `scope_messages`: {e}")),
    }
    match api.take_events().await {
        Ok(events) if events.iter().any(|e| e.name == "conversation:rewound") => checks.ok(
            "events",
            format!(
                "{} taken: {}",
                events.len(),
                events
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        Ok(events) => checks.fail(
            "events",
            format!(
                "a completed rewind publishes `conversation:rewound` (spec section 8); the \
                 events taken were: [{}]",
                events
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        Err(e) => checks.error("events", &e),
    }
}

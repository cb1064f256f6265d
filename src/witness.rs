//! [`DeliveryWitness`]: proof of what was committed when a runtime received a delivery.
//!
//! Spec section 5 makes the daemon write a message's recovery point *before* it may deliver
//! the message to a rewind-capable runtime. Timestamps cannot prove that order (clocks of two
//! processes, commit times that are not insert times), so the harness observes it causally: the
//! mock runtimes, when handed a delivering input (a codex `turn/start`, a claude run with a
//! prompt, an OpenCode prompt), call the URL in `REWIND_MOCK_WITNESS_URL` and hold the input
//! until the witness answers. The witness reads `message_recovery_points` on a connection of its
//! own, outside any transaction, so it sees exactly the rows committed at that moment, and keeps
//! them with what the runtime reported about its state just before the input.
//!
//! A point committed only after the runtime answered is therefore never seen. What the witness
//! cannot rule out is a writer that hands the input over and commits the point in parallel,
//! winning the race against the witness's read; the check catches that only when the commit
//! loses.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use rewind_mock_runtimes::witness::{WitnessAnswer, WitnessRequest};
use serde_json::Value;
use sqlx::PgPool;

/// A recovery point as it was committed when a delivery was witnessed.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CommittedPoint {
    /// `message_recovery_points.id`.
    pub id: String,
    /// The message it belongs to.
    pub message_id: String,
    /// The agent.
    pub agent_id: String,
    /// The runtime id recorded.
    pub runtime: String,
    /// The strategy recorded.
    pub strategy: String,
    /// The restore ref.
    pub recovery_ref: Value,
}

/// One delivering input a mock runtime received.
#[derive(Debug, Clone, PartialEq)]
pub struct Witnessed {
    /// The witness number the mock journaled with the call (1, 2, ... in arrival order).
    pub number: u64,
    /// What the mock reported: runtime, target session, input text, state before the input.
    pub request: WitnessRequest,
    /// Every recovery point committed at that moment.
    pub committed: Vec<CommittedPoint>,
}

#[derive(Clone)]
struct Shared {
    pool: PgPool,
    records: Arc<Mutex<Vec<Witnessed>>>,
}

/// A witness server for one scenario's database, listening on loopback until dropped.
#[derive(Debug)]
pub struct DeliveryWitness {
    url: String,
    records: Arc<Mutex<Vec<Witnessed>>>,
    task: tokio::task::JoinHandle<()>,
}

impl DeliveryWitness {
    /// Starts a witness reading the committed recovery points of `pool`'s database.
    pub async fn start(pool: PgPool) -> std::io::Result<DeliveryWitness> {
        let records = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            pool,
            records: Arc::clone(&records),
        };
        let app = Router::new()
            .route("/witness", post(witness))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let url = format!("http://{}/witness", listener.local_addr()?);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("the delivery witness stopped: {e}");
            }
        });
        Ok(DeliveryWitness { url, records, task })
    }

    /// The URL the mocks call (`REWIND_MOCK_WITNESS_URL`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every delivery witnessed so far, in arrival order.
    pub fn records(&self) -> Vec<Witnessed> {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for DeliveryWitness {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn witness(
    State(shared): State<Shared>,
    Json(request): Json<WitnessRequest>,
) -> Result<Json<WitnessAnswer>, (StatusCode, String)> {
    // Outside any transaction: exactly the rows committed now.
    let committed: Vec<CommittedPoint> = sqlx::query_as(
        "SELECT id, message_id, agent_id, runtime, strategy, recovery_ref \
         FROM message_recovery_points ORDER BY id",
    )
    .fetch_all(&shared.pool)
    .await
    .map_err(|e| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("reading message_recovery_points: {e}"),
        )
    })?;
    let mut records = shared.records.lock().unwrap_or_else(|p| p.into_inner());
    let number = records.len() as u64 + 1;
    records.push(Witnessed {
        number,
        request,
        committed,
    });
    Ok(Json(WitnessAnswer { witness: number }))
}

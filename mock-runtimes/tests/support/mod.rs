//! A delivery witness server for the protocol tests: a tiny HTTP server on loopback that
//! records every [`WitnessRequest`] a mock POSTs, runs a hook at that moment (to look at the
//! mock's state while the mock waits), and answers `{"witness": N}` with N counting up from
//! [`FIRST_WITNESS`].

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use rewind_mock_runtimes::witness::WitnessRequest;
use serde_json::Value;

/// The number the first request is answered with.
pub const FIRST_WITNESS: u64 = 1000;

/// How the server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 200 `{"witness": N}`.
    Witness,
    /// 500 with a text body.
    ServerError,
    /// 200 with a body that is not a witness answer.
    BadJson,
}

type Hook = Arc<dyn Fn(&WitnessRequest) -> Value + Send + Sync>;

/// One request the server received, with what the hook saw at that moment.
#[derive(Debug, Clone)]
pub struct Seen {
    pub request: WitnessRequest,
    pub hook: Value,
    /// The number answered (for [`Answer::Witness`]).
    pub witness: u64,
}

/// A running witness server; it stops when dropped.
pub struct WitnessServer {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl WitnessServer {
    /// Answers every request with a witness number; no hook.
    pub fn start() -> WitnessServer {
        WitnessServer::start_with(Answer::Witness, |_| Value::Null)
    }

    /// Answers as `answer` says, after running `hook` on the request.
    pub fn start_with(
        answer: Answer,
        hook: impl Fn(&WitnessRequest) -> Value + Send + Sync + 'static,
    ) -> WitnessServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/witness", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let hook: Hook = Arc::new(hook);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = (Arc::clone(&seen), hook);
        // The server thread ends on its own once stopped (it is not joined: a client that
        // keeps a connection open must not hold up the test).
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = Router::new().route(
                    "/witness",
                    post(move |body: Bytes| {
                        let (seen, hook) = state.clone();
                        async move { handle(&seen, &hook, answer, &body) }
                    }),
                );
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        WitnessServer {
            url,
            seen,
            stop: Some(stop),
        }
    }

    /// The URL to put in `REWIND_MOCK_WITNESS_URL`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every request so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<WitnessRequest> {
        self.seen().into_iter().map(|s| s.request).collect()
    }
}

impl Drop for WitnessServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn handle(seen: &Mutex<Vec<Seen>>, hook: &Hook, answer: Answer, body: &[u8]) -> Response {
    let request: WitnessRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("not a witness request: {e}"),
            )
                .into_response()
        }
    };
    let observed = hook(&request);
    let mut seen = seen.lock().unwrap();
    let witness = FIRST_WITNESS + seen.len() as u64;
    seen.push(Seen {
        request,
        hook: observed,
        witness,
    });
    match answer {
        Answer::Witness => axum::Json(serde_json::json!({ "witness": witness })).into_response(),
        Answer::ServerError => {
            (StatusCode::INTERNAL_SERVER_ERROR, "witness broken").into_response()
        }
        Answer::BadJson => (StatusCode::OK, "not json").into_response(),
    }
}

/// A loopback URL nothing listens on.
pub fn unreachable_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/witness", listener.local_addr().unwrap());
    drop(listener);
    url
}

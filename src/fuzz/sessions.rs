//! The agents' runtime sessions (`runtime_sessions`, seeded into the mock runtimes) and the
//! recovery points the daemon wrote before each delivery, consistent with each other as the
//! shipped fixtures are:
//!
//! - codex: a thread of turns (`input_message`, `output_message`); recovery ref
//!   `{threadId, turnCount}` with the number of turns before the message;
//! - claude: a transcript of user and assistant entries; recovery ref
//!   `{sessionId, boundaryUuid}` with the entry before the message's user entry (`null`, the
//!   zero boundary, for the first input);
//! - opencode and builtin: a session of user and assistant messages; recovery ref
//!   `{sessionId, messageId}` with the user message bound to the prompt.
//!
//! A turn whose input is an earlier rewind's tombstone was rolled back by that rewind: it is
//! in no session, and its recovery point was consumed.

use serde_json::{json, Value};

use super::build::{Builder, Rp, RUNTIMES};
use super::ids;
use super::model::RecoveryPointRow;

/// One turn: the delivered message and the agent's answer, if any.
struct Turn {
    input: usize,
    output: Option<usize>,
    rp: Rp,
}

/// What sessions give the model.
pub(super) struct Sessions {
    /// The session id of each agent (`None`: no turn, or an unsupported runtime).
    pub session_ids: Vec<Option<String>>,
    /// `runtime_sessions`, by agent id.
    pub states: Vec<(String, Value)>,
    /// `recovery_points`.
    pub recovery_points: Vec<RecoveryPointRow>,
}

/// Builds every agent's session and recovery points.
pub(super) fn sessions(b: &Builder<'_>) -> Sessions {
    let mut out = Sessions {
        session_ids: vec![None; b.agents.len()],
        states: Vec::new(),
        recovery_points: Vec::new(),
    };
    for (a, agent) in b.agents.iter().enumerate() {
        let mut turns: Vec<Turn> = Vec::new();
        for &m in &b.order {
            let message = &b.msgs[m];
            if !message.visible() {
                continue;
            }
            for delivery in message.deliveries.iter().filter(|d| d.agent == a) {
                let output = b.order.iter().copied().find(|&o| {
                    b.msgs[o].reply_to == Some(m)
                        && b.msgs[o].author == super::build::Auth::Agent(a)
                        && b.msgs[o].visible()
                });
                turns.push(Turn {
                    input: m,
                    output,
                    rp: delivery.rp,
                });
            }
        }
        if turns.is_empty() {
            continue;
        }
        let (seed, index) = (b.seed, b.index);
        let id = |m: usize| b.msgs[m].id.clone();
        let mut point = |m: usize, strategy: Option<&str>, recovery_ref: Value| {
            out.recovery_points.push(RecoveryPointRow {
                agent: agent.id.clone(),
                message: id(m),
                strategy: strategy.map(str::to_owned),
                recovery_ref,
            });
        };
        match agent.runtime.as_str() {
            "codex" => {
                let thread = ids::uuid(seed, index, &format!("codex:{}", agent.id));
                let mut listed = Vec::new();
                for (k, turn) in turns.iter().enumerate() {
                    let mut entry =
                        json!({"id": format!("turn-{}", k + 1), "input_message": id(turn.input)});
                    if let Some(output) = turn.output {
                        entry["output_message"] = json!(id(output));
                    }
                    listed.push(entry);
                    match turn.rp {
                        Rp::Normal => point(
                            turn.input,
                            None,
                            json!({"threadId": thread, "turnCount": k}),
                        ),
                        Rp::Mismatch => point(
                            turn.input,
                            Some("claude_session_resume_at"),
                            json!({"sessionId": thread, "boundaryUuid": Value::Null}),
                        ),
                        Rp::Missing => {}
                    }
                }
                out.states.push((
                    agent.id.clone(),
                    json!({"thread_id": thread, "turns": listed}),
                ));
                out.session_ids[a] = Some(thread);
            }
            "claude" => {
                let session = ids::uuid(seed, index, &format!("claude:{}", agent.id));
                let mut transcript = Vec::new();
                let mut boundary = Value::Null;
                for (k, turn) in turns.iter().enumerate() {
                    match turn.rp {
                        Rp::Normal => point(
                            turn.input,
                            None,
                            json!({"sessionId": session, "boundaryUuid": boundary}),
                        ),
                        Rp::Mismatch => point(
                            turn.input,
                            Some("codex_app_server_turns"),
                            json!({"threadId": session, "turnCount": k}),
                        ),
                        Rp::Missing => {}
                    }
                    let user = ids::uuid(
                        seed,
                        index,
                        &format!("claude:{}:{}:user", agent.id, id(turn.input)),
                    );
                    transcript
                        .push(json!({"uuid": user, "type": "user", "message": id(turn.input)}));
                    boundary = json!(user);
                    if let Some(output) = turn.output {
                        let reply = ids::uuid(
                            seed,
                            index,
                            &format!("claude:{}:{}:assistant", agent.id, id(output)),
                        );
                        transcript.push(
                            json!({"uuid": reply, "type": "assistant", "message": id(output)}),
                        );
                        boundary = json!(reply);
                    }
                }
                out.states.push((
                    agent.id.clone(),
                    json!({"session_id": session, "transcript": transcript}),
                ));
                out.session_ids[a] = Some(session);
            }
            "opencode" | "builtin" => {
                let session = ids::opencode("ses", 0, seed, index, &format!("ses:{}", agent.id));
                let mut messages = Vec::new();
                let mut ordinal = 0u64;
                for (k, turn) in turns.iter().enumerate() {
                    ordinal += 1;
                    let user = ids::opencode(
                        "msg",
                        ordinal,
                        seed,
                        index,
                        &format!("{}:{}", agent.id, id(turn.input)),
                    );
                    messages.push(json!({"id": user, "role": "user", "message": id(turn.input)}));
                    match turn.rp {
                        Rp::Normal => point(
                            turn.input,
                            None,
                            json!({"sessionId": session, "messageId": user}),
                        ),
                        Rp::Mismatch => point(
                            turn.input,
                            Some("codex_app_server_turns"),
                            json!({"threadId": ids::uuid(seed, index, &session), "turnCount": k}),
                        ),
                        Rp::Missing => {}
                    }
                    if let Some(output) = turn.output {
                        ordinal += 1;
                        let reply = ids::opencode(
                            "msg",
                            ordinal,
                            seed,
                            index,
                            &format!("{}:{}", agent.id, id(output)),
                        );
                        messages
                            .push(json!({"id": reply, "role": "assistant", "message": id(output)}));
                    }
                }
                out.states.push((
                    agent.id.clone(),
                    json!({"session_id": session, "messages": messages}),
                ));
                out.session_ids[a] = Some(session);
            }
            _ => {
                // No runtime to restore: the daemon still wrote points of the strategy it
                // guessed, which no capability of this runtime accepts.
                debug_assert!(!RUNTIMES.contains(&agent.runtime.as_str()));
                let session = ids::opencode("ses", 0, seed, index, &format!("ses:{}", agent.id));
                for (k, turn) in turns.iter().enumerate() {
                    if turn.rp == Rp::Missing {
                        continue;
                    }
                    let user = ids::opencode(
                        "msg",
                        k as u64 + 1,
                        seed,
                        index,
                        &format!("{}:{}", agent.id, id(turn.input)),
                    );
                    point(
                        turn.input,
                        Some("opencode_session_revert"),
                        json!({"sessionId": session, "messageId": user}),
                    );
                }
            }
        }
    }
    out
}

//! Every read surface of spec section 1 behind one gate: history, by-id, search, receive, root and
//! source context, share cards, pins, reactions, attachment read-check and download, delivery
//! diagnostics and their preview, durable stream replay and the conversation index.
//!
//! The spec makes `scope_messages` plus its lifecycle metadata the final authority for whether a
//! message exists (6.1.1); projections (cards, reactions, pins, search documents, sources,
//! attachments, stream events, index rows) and delivery evidence (outbox, activity) only say
//! *which* message they are about. So every surface here reaches message content through one
//! derived table, [`READABLE`], and never reads `scope_messages` on its own: a projection row whose
//! message is a rewound tombstone simply joins to nothing, whether the scrub already removed it
//! or a stale copy came back later. A rewound message is indistinguishable from one that never
//! existed; a recalled one stays a placeholder with no content.

use serde_json::{json, Value};
use sqlx::{PgConnection, PgPool};

use crate::error::{DbContext, RewindError};
use crate::sql::MESSAGE_NOT_REWOUND_SQL;
use rewind_driver_protocol::{
    Actor, ReadAnswer, ReadMessage, ReadRejection, ReadRequest, ReadSurface,
};

/// The readable gate: the `scope_messages` rows a read surface may show, as a derived table with
/// `recalled` and the content as shown (none for a recalled placeholder). Every surface selects
/// messages from this, aliased `r`; nothing else in this module reads `scope_messages`.
fn readable() -> String {
    format!(
        "(SELECT m.id, m.scope_id, m.seq, m.author_user_id, m.author_agent_id, \
                 coalesce(m.metadata #>> '{{messageRecall,status}}', '') = 'recalled' AS recalled, \
                 CASE WHEN coalesce(m.metadata #>> '{{messageRecall,status}}', '') = 'recalled' \
                      THEN '' ELSE m.content END AS content \
          FROM scope_messages m WHERE {MESSAGE_NOT_REWOUND_SQL})"
    )
}

/// The columns of a [`ReadMessage`], from a [`readable`] row aliased `r`.
const MESSAGE_COLUMNS: &str = "r.id, r.scope_id, r.seq, r.content, r.recalled";

type MessageRow = (String, String, i64, String, bool);

fn message((id, scope_id, seq, content, recalled): MessageRow) -> ReadMessage {
    ReadMessage {
        id,
        scope_id,
        seq,
        content,
        recalled,
    }
}

/// The page size when the request names none, and the largest one served.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 500;

/// Why a read stopped early: an answer found on the way (a rejection, not found), or a failure.
enum Stop {
    Answer(ReadAnswer),
    Failed(RewindError),
}

impl From<RewindError> for Stop {
    fn from(e: RewindError) -> Self {
        Stop::Failed(e)
    }
}

type Answer = Result<ReadAnswer, Stop>;

fn rejected(reason: ReadRejection, message: impl Into<String>) -> Stop {
    Stop::Answer(ReadAnswer::Rejected {
        reason,
        message: message.into(),
    })
}

fn not_found(message: impl Into<String>) -> Stop {
    Stop::Answer(ReadAnswer::NotFound {
        message: message.into(),
    })
}

fn found(messages: Vec<ReadMessage>, records: Vec<Value>, next_cursor: Option<String>) -> Answer {
    let mut seen = std::collections::HashSet::new();
    let messages = messages
        .into_iter()
        .filter(|m| seen.insert(m.id.clone()))
        .collect();
    Ok(ReadAnswer::Found {
        messages,
        records,
        next_cursor,
    })
}

/// A field `surface` needs.
fn required<'a>(
    value: &'a Option<String>,
    field: &str,
    surface: ReadSurface,
) -> Result<&'a str, Stop> {
    value.as_deref().ok_or_else(|| {
        rejected(
            ReadRejection::BadRequest,
            format!("the `{}` surface needs `{field}`", surface.name()),
        )
    })
}

/// Answers one read: a surface's answer, not found, or a rejection; an error only when the
/// database fails.
pub async fn read(pool: &PgPool, request: &ReadRequest) -> Result<ReadAnswer, RewindError> {
    // One connection for the read's statements: handing one back and asking for the next at
    // once would open another.
    let mut conn = pool.acquire().await.db("acquiring a connection")?;
    match answer(&mut conn, request).await {
        Ok(answer) | Err(Stop::Answer(answer)) => Ok(answer),
        Err(Stop::Failed(e)) => Err(e),
    }
}

async fn answer(conn: &mut PgConnection, request: &ReadRequest) -> Answer {
    let scope = request.scope_id.as_str();
    let row: Option<(String, Option<String>)> =
        sqlx::query_as("SELECT kind, parent_scope_id FROM scopes WHERE id = $1")
            .bind(scope)
            .fetch_optional(&mut *conn)
            .await
            .db("reading the scope")?;
    let Some((scope_kind, parent_scope)) = row else {
        return Err(rejected(
            ReadRejection::UnknownScope,
            format!("scope `{scope}` does not exist"),
        ));
    };
    check_member(conn, scope, parent_scope.as_deref(), &request.reader).await?;
    let limit = match request.limit {
        None => DEFAULT_LIMIT,
        Some(n) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(n) => {
            return Err(rejected(
                ReadRejection::BadRequest,
                format!("limit {n} is outside 1..={MAX_LIMIT}"),
            ))
        }
    };
    let surface = request.surface;
    let message_id = || required(&request.message_id, "messageId", surface);
    match surface {
        ReadSurface::History => history(conn, scope, request.cursor.as_deref(), limit).await,
        ReadSurface::Message => by_id(conn, scope, message_id()?).await,
        ReadSurface::Search => {
            search(conn, scope, required(&request.query, "query", surface)?).await
        }
        ReadSurface::Receive => receive(conn, scope, &request.reader).await,
        ReadSurface::RootContext => root_context(conn, scope, &scope_kind).await,
        ReadSurface::SourceContext => source_context(conn, scope, message_id()?).await,
        ReadSurface::ShareCards => share_cards(conn, scope).await,
        ReadSurface::Pins => pins(conn, scope).await,
        ReadSurface::Reactions => reactions(conn, scope, message_id()?).await,
        ReadSurface::Attachment | ReadSurface::AttachmentDownload => {
            let id = required(&request.attachment_id, "attachmentId", surface)?;
            attachment(conn, scope, id, surface == ReadSurface::AttachmentDownload).await
        }
        ReadSurface::Diagnostics => diagnostics(conn, scope, message_id()?).await,
        ReadSurface::DiagnosticsPreview => diagnostics_preview(conn, scope).await,
        ReadSurface::Stream => stream(conn, scope, request.cursor.as_deref(), limit).await,
        ReadSurface::ConversationIndex => conversation_index(conn, scope, &request.reader).await,
    }
}

/// The reader must be a member of the scope, or, for a reply thread, of the scope it forks
/// from (a thread is read by its channel's members).
async fn check_member(
    conn: &mut PgConnection,
    scope: &str,
    parent_scope: Option<&str>,
    reader: &Actor,
) -> Result<(), Stop> {
    let (column, id, who) = match reader {
        Actor::Human(id) => ("user_id", id, format!("human `{id}`")),
        Actor::Agent(id) => ("agent_id", id, format!("agent `{id}`")),
        Actor::System => {
            return Err(rejected(
                ReadRejection::BadRequest,
                "the reader must be a human or an agent, not the system",
            ))
        }
    };
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM scope_memberships \
                        WHERE {column} = $1 AND (scope_id = $2 OR scope_id = $3))"
    );
    let member: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(scope)
        .bind(parent_scope)
        .fetch_one(&mut *conn)
        .await
        .db("checking the reader's membership")?;
    if member {
        Ok(())
    } else {
        Err(rejected(
            ReadRejection::NotMember,
            format!("{who} is not a member of scope `{scope}`"),
        ))
    }
}

/// One readable message of `scope`, or not found.
async fn readable_message(
    conn: &mut PgConnection,
    scope: &str,
    id: &str,
) -> Result<ReadMessage, Stop> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM {} r WHERE r.id = $1 AND r.scope_id = $2",
        readable()
    );
    let row: Option<MessageRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(scope)
        .fetch_optional(&mut *conn)
        .await
        .db("reading a message")?;
    row.map(message)
        .ok_or_else(|| not_found(format!("no message `{id}` in scope `{scope}`")))
}

/// Rows of `sql`, which selects [`MESSAGE_COLUMNS`] from the gate, bound to `scope`.
async fn messages_of(
    conn: &mut PgConnection,
    sql: String,
    scope: &str,
) -> Result<Vec<ReadMessage>, Stop> {
    let rows: Vec<MessageRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(scope)
        .fetch_all(&mut *conn)
        .await
        .db("reading messages")?;
    Ok(rows.into_iter().map(message).collect())
}

/// Parses a cursor this module returned: `<prefix>:<position>`.
fn parse_cursor(cursor: Option<&str>, prefix: &str, scope: &str) -> Result<i64, Stop> {
    let Some(cursor) = cursor else { return Ok(0) };
    cursor
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix(':'))
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|n| *n >= 0)
        .ok_or_else(|| {
            rejected(
                ReadRejection::BadCursor,
                format!("`{cursor}` is not a {prefix} cursor of scope `{scope}`"),
            )
        })
}

async fn history(conn: &mut PgConnection, scope: &str, cursor: Option<&str>, limit: i64) -> Answer {
    let after = parse_cursor(cursor, "history", scope)?;
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM {} r WHERE r.scope_id = $1 AND r.seq > {after} \
         ORDER BY r.seq LIMIT {}",
        readable(),
        limit + 1
    );
    let mut messages = messages_of(conn, sql, scope).await?;
    let more = messages.len() as i64 > limit;
    messages.truncate(limit as usize);
    let next = more.then(|| format!("history:{}", messages.last().map_or(after, |m| m.seq)));
    found(messages, Vec::new(), next)
}

async fn by_id(conn: &mut PgConnection, scope: &str, id: &str) -> Answer {
    found(
        vec![readable_message(conn, scope, id).await?],
        Vec::new(),
        None,
    )
}

/// Search reads the search documents (the index) for candidates, and the gate for what to show:
/// a document left behind by a rewound message finds nothing.
async fn search(conn: &mut PgConnection, scope: &str, query: &str) -> Answer {
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    if words.is_empty() {
        return Err(rejected(
            ReadRejection::BadRequest,
            "the search query is empty",
        ));
    }
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM scope_message_search_docs d \
         JOIN {} r ON r.id = d.message_id AND NOT r.recalled \
         WHERE d.scope_id = $1 \
           AND (SELECT bool_and(strpos(lower(d.body), w) > 0) FROM unnest($2::text[]) w) \
         ORDER BY r.seq",
        readable()
    );
    let rows: Vec<MessageRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(scope)
        .bind(&words)
        .fetch_all(&mut *conn)
        .await
        .db("searching")?;
    found(rows.into_iter().map(message).collect(), Vec::new(), None)
}

/// What the reader receives: visible messages after its read position that it did not write.
async fn receive(conn: &mut PgConnection, scope: &str, reader: &Actor) -> Answer {
    let (column, author_column, id) = match reader {
        Actor::Human(id) => ("user_id", "author_user_id", id),
        Actor::Agent(id) => ("agent_id", "author_agent_id", id),
        Actor::System => {
            return Err(rejected(
                ReadRejection::BadRequest,
                "the system receives nothing",
            ))
        }
    };
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM {} r \
         WHERE r.scope_id = $1 AND NOT r.recalled \
           AND r.seq > coalesce((SELECT last_read_seq FROM scope_memberships \
                                 WHERE scope_id = $1 AND {column} = $2), 0) \
           AND r.{author_column} IS DISTINCT FROM $2 \
         ORDER BY r.seq",
        readable()
    );
    let rows: Vec<MessageRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(scope)
        .bind(id)
        .fetch_all(&mut *conn)
        .await
        .db("receiving")?;
    found(rows.into_iter().map(message).collect(), Vec::new(), None)
}

/// The root of a reply thread: the message it forks from, when that is readable.
async fn root_context(conn: &mut PgConnection, scope: &str, kind: &str) -> Answer {
    if kind != "reply_thread" {
        return found(Vec::new(), Vec::new(), None);
    }
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM scopes s JOIN {} r ON r.id = s.parent_message_id \
         WHERE s.id = $1",
        readable()
    );
    found(messages_of(conn, sql, scope).await?, Vec::new(), None)
}

/// The messages a readable message cites, each through the gate (the citing message must be
/// readable itself).
async fn source_context(conn: &mut PgConnection, scope: &str, id: &str) -> Answer {
    let citing = readable_message(conn, scope, id).await?;
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, src.id FROM scope_message_sources src \
         JOIN {} r ON r.id = src.source_message_id \
         WHERE src.message_id = $1 ORDER BY r.scope_id, r.seq",
        readable()
    );
    let rows: Vec<(String, String, i64, String, bool, String)> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_all(&mut *conn)
            .await
            .db("reading sources")?;
    let records = rows
        .iter()
        .map(|r| json!({"sourceId": r.5, "messageId": citing.id, "sourceMessageId": r.0}))
        .collect();
    let sources = rows
        .into_iter()
        .map(|(a, b, c, d, e, _)| message((a, b, c, d, e)))
        .collect();
    found(sources, records, None)
}

async fn share_cards(conn: &mut PgConnection, scope: &str) -> Answer {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, c.id, c.action_state FROM scope_share_cards c \
         JOIN {} r ON r.id = c.message_id \
         WHERE c.target_scope_id = $1 ORDER BY c.id",
        readable()
    );
    let rows: Vec<(String, String, i64, String, bool, String, Value)> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(scope)
            .fetch_all(&mut *conn)
            .await
            .db("reading share cards")?;
    let records = rows
        .iter()
        .map(|r| json!({"cardId": r.5, "messageId": r.0, "actionState": r.6}))
        .collect();
    let messages = rows
        .into_iter()
        .map(|(a, b, c, d, e, _, _)| message((a, b, c, d, e)))
        .collect();
    found(messages, records, None)
}

async fn pins(conn: &mut PgConnection, scope: &str) -> Answer {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM scope_message_pins p JOIN {} r ON r.id = p.message_id \
         WHERE p.scope_id = $1 ORDER BY r.seq",
        readable()
    );
    found(messages_of(conn, sql, scope).await?, Vec::new(), None)
}

async fn reactions(conn: &mut PgConnection, scope: &str, id: &str) -> Answer {
    let reacted = readable_message(conn, scope, id).await?;
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT reactor_kind, reactor_id, emoji FROM scope_message_reactions \
         WHERE message_id = $1 ORDER BY created_at, reactor_id, emoji",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await
    .db("reading reactions")?;
    let records = rows
        .into_iter()
        .map(|(kind, who, emoji)| {
            json!({"messageId": reacted.id, "reactorKind": kind, "reactorId": who, "emoji": emoji})
        })
        .collect();
    found(vec![reacted], records, None)
}

/// The read-check (and download) of an attachment: a message attachment exists only while its
/// message is readable; task and upload attachments belong to no message.
async fn attachment(conn: &mut PgConnection, scope: &str, id: &str, download: bool) -> Answer {
    /// owner kind, scope, message, file name, content type, size, storage key
    type AttachmentRow = (
        String,
        Option<String>,
        Option<String>,
        String,
        String,
        i64,
        String,
    );
    let row: Option<AttachmentRow> = sqlx::query_as(
        "SELECT owner_kind, scope_id, message_id, file_name, content_type, byte_size, \
                    storage_key FROM attachments WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await
    .db("reading the attachment")?;
    let missing = || not_found(format!("no attachment `{id}` in scope `{scope}`"));
    let (owner, att_scope, message_id, file_name, content_type, byte_size, storage_key) =
        row.ok_or_else(missing)?;
    let mut messages = Vec::new();
    match message_id {
        Some(message_id) => {
            let owner_message = readable_message(conn, scope, &message_id)
                .await
                .map_err(|_| missing())?;
            messages.push(owner_message);
        }
        None if att_scope.as_deref() == Some(scope) => {}
        None => return Err(missing()),
    }
    let mut record = json!({
        "attachmentId": id, "ownerKind": owner, "fileName": file_name,
        "contentType": content_type, "byteSize": byte_size,
    });
    if let Some(m) = messages.first() {
        record["messageId"] = json!(m.id);
    }
    if download {
        record["storageKey"] = json!(storage_key);
    }
    found(messages, vec![record], None)
}

/// Delivery diagnostics start from the readable transcript row; only then are the message's
/// deliveries read, and never used to reconstruct a message the gate does not show.
async fn diagnostics(conn: &mut PgConnection, scope: &str, id: &str) -> Answer {
    let diagnosed = readable_message(conn, scope, id).await?;
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT recipient_kind, recipient_id, status FROM scope_fanout_outbox \
         WHERE message_id = $1 ORDER BY id",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await
    .db("reading deliveries")?;
    let records = rows
        .into_iter()
        .map(|(kind, who, status)| {
            json!({"messageId": diagnosed.id, "recipientKind": kind, "recipientId": who, "status": status})
        })
        .collect();
    found(vec![diagnosed], records, None)
}

/// The diagnostics preview: the scope's latest readable messages, each with its delivery
/// counts by status.
async fn diagnostics_preview(conn: &mut PgConnection, scope: &str) -> Answer {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, \
                coalesce((SELECT jsonb_object_agg(status, n) FROM \
                          (SELECT o.status, count(*) AS n FROM scope_fanout_outbox o \
                           WHERE o.message_id = r.id GROUP BY o.status) c), '{{}}'::jsonb) \
         FROM {} r WHERE r.scope_id = $1 ORDER BY r.seq DESC LIMIT 20",
        readable()
    );
    let mut rows: Vec<(String, String, i64, String, bool, Value)> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(scope)
            .fetch_all(&mut *conn)
            .await
            .db("reading the diagnostics preview")?;
    rows.reverse();
    let records = rows
        .iter()
        .map(|r| json!({"messageId": r.0, "deliveries": r.5}))
        .collect();
    let messages = rows
        .into_iter()
        .map(|(a, b, c, d, e, _)| message((a, b, c, d, e)))
        .collect();
    found(messages, records, None)
}

/// Durable stream replay: the scope's events in order; an event about a message is replayed
/// only while the message is readable.
async fn stream(conn: &mut PgConnection, scope: &str, cursor: Option<&str>, limit: i64) -> Answer {
    let after = parse_cursor(cursor, "stream", scope)?;
    let sql = format!(
        "SELECT e.id, e.event_type, e.message_id, e.payload_json, {MESSAGE_COLUMNS} \
         FROM im_stream_events e LEFT JOIN {} r ON r.id = e.message_id \
         WHERE e.scope_id = $1 AND e.id > {after} AND (e.message_id IS NULL OR r.id IS NOT NULL) \
         ORDER BY e.id LIMIT {}",
        readable(),
        limit + 1
    );
    type Row = (
        i64,
        String,
        Option<String>,
        Value,
        Option<String>,
        Option<String>,
        Option<i64>,
        Option<String>,
        Option<bool>,
    );
    let mut rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(scope)
        .fetch_all(&mut *conn)
        .await
        .db("replaying the stream")?;
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let next = more.then(|| format!("stream:{}", rows.last().map_or(after, |r| r.0)));
    let mut messages = Vec::new();
    let mut records = Vec::new();
    for (event_id, event_type, message_id, payload, id, scope_id, seq, content, recalled) in rows {
        records.push(json!({
            "eventId": event_id, "eventType": event_type, "messageId": message_id,
            "payload": payload,
        }));
        if let (Some(id), Some(scope_id), Some(seq), Some(content), Some(recalled)) =
            (id, scope_id, seq, content, recalled)
        {
            messages.push(message((id, scope_id, seq, content, recalled)));
        }
    }
    found(messages, records, next)
}

/// The reader's conversation-index entry: the last message is the scope's readable tail, so a
/// stored entry that still names a rewound message (or a stale preview) is never served.
async fn conversation_index(conn: &mut PgConnection, scope: &str, reader: &Actor) -> Answer {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM {} r WHERE r.scope_id = $1 ORDER BY r.seq DESC LIMIT 1",
        readable()
    );
    let last = messages_of(conn, sql, scope).await?;
    let reader = match reader {
        Actor::Human(id) | Actor::Agent(id) => id.as_str(),
        Actor::System => "",
    };
    let record = json!({
        "scopeId": scope,
        "userId": reader,
        "messageId": last.first().map(|m| m.id.clone()),
        "preview": last.first().map(|m| m.content.clone()),
    });
    found(last, vec![record], None)
}

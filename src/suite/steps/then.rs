//! Then steps: what the implementation answered and what the database now holds.

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::gherkin::Step;
use cucumber::then;
use rewind_conformance::inspect::line_diff;
use rewind_conformance::sut::RewindResponse;
use sqlx::AssertSqlSafe;

use super::id_list;
use crate::suite::world::{context, RewindWorld};

fn describe(response: &RewindResponse) -> String {
    match response {
        RewindResponse::Completed {
            operation_id,
            status,
            ..
        } => format!("the rewind completed (operation `{operation_id}`, status `{status}`)"),
        RewindResponse::Refused { code, message, .. } => {
            format!("the rewind was refused with `{message}` (code `{code}`)")
        }
    }
}

/// The answer is a refusal with exactly this message, and with the catalog's code for it.
#[then(expr = "the rewind is refused with {string}")]
async fn refused_with(world: &mut RewindWorld, expected: String) -> anyhow::Result<()> {
    let response = world.last_response()?;
    let RewindResponse::Refused { code, message, .. } = response else {
        bail!(
            "expected a refusal with `{expected}`, but {}",
            describe(response)
        );
    };
    ensure!(
        *message == expected,
        "wrong refusal message\n{}",
        line_diff(&expected, message)
    );
    let ctx = context()?;
    if let Some(rule) = ctx.catalog.error_by_message(&expected) {
        let want = rule.code.as_deref().unwrap_or_default();
        ensure!(
            code == want,
            "refusal `{expected}` carries code `{code}`, but rule `{}` fixes it as `{want}`",
            rule.id
        );
    }
    Ok(())
}

/// The answer is a refusal with either message (where the spec does not say which of two
/// guards that both apply refuses first), each with the catalog's code for it.
#[then(expr = "the rewind is refused with {string} or {string}")]
async fn refused_with_either(
    world: &mut RewindWorld,
    first: String,
    second: String,
) -> anyhow::Result<()> {
    let response = world.last_response()?;
    let RewindResponse::Refused { message, .. } = response else {
        bail!(
            "expected a refusal with `{first}` or `{second}`, but {}",
            describe(response)
        );
    };
    let expected = if *message == second { second } else { first };
    refused_with(world, expected).await
}

/// The answer is a refusal, whatever its wording (for refusals the spec does not word).
#[then("the rewind is refused")]
async fn refused(world: &mut RewindWorld) -> anyhow::Result<()> {
    let response = world.last_response()?;
    ensure!(
        matches!(response, RewindResponse::Refused { .. }),
        "expected a refusal, but {}",
        describe(response)
    );
    Ok(())
}

/// The answer is a completed operation, and the section 10 invariants hold.
#[then("the rewind completes")]
async fn completes(world: &mut RewindWorld) -> anyhow::Result<()> {
    let response = world.last_response()?;
    match response {
        RewindResponse::Completed { status, .. } if status == "completed" => {}
        other => bail!("expected the rewind to complete, but {}", describe(other)),
    }
    super::invariants::check_after_rewind(world).await
}

/// Every table holds exactly the rows it held before the last operation.
#[then("the database is unchanged")]
async fn database_unchanged(world: &mut RewindWorld) -> anyhow::Result<()> {
    let before = world.before_snapshot()?;
    let after = world.snapshot().await?;
    let diff = before.diff(&after);
    ensure!(diff.is_empty(), "the database changed:\n{diff}");
    Ok(())
}

/// Each message still exists, with content `''` and metadata holding only
/// `messageRecall.status = "rewound"` and `rewoundAt`.
#[then(expr = "messages {string} are rewound tombstones")]
async fn are_tombstones(world: &mut RewindWorld, ids: String) -> anyhow::Result<()> {
    let pool = world.pool()?;
    for id in id_list(&ids) {
        let row: Option<(String, serde_json::Value)> =
            sqlx::query_as("SELECT content, metadata FROM scope_messages WHERE id = $1")
                .bind(&id)
                .fetch_optional(pool)
                .await
                .context("reading scope_messages")?;
        let (content, metadata) = row.ok_or_else(|| {
            anyhow!("scope_messages row `{id}` is gone: a rewind must tombstone, never delete")
        })?;
        ensure!(
            content.is_empty(),
            "scope_messages.content of `{id}` is {content:?}, expected ''"
        );
        let recall = metadata
            .as_object()
            .filter(|m| m.len() == 1)
            .and_then(|m| m.get("messageRecall"))
            .and_then(|r| r.as_object());
        let ok = recall.is_some_and(|r| {
            r.len() == 2
                && r.get("status").and_then(|s| s.as_str()) == Some("rewound")
                && r.get("rewoundAt")
                    .and_then(|s| s.as_str())
                    .is_some_and(|s| chrono::DateTime::parse_from_rfc3339(s).is_ok())
        });
        ensure!(
            ok,
            "scope_messages.metadata of `{id}` is {metadata}, expected exactly \
             {{\"messageRecall\": {{\"status\": \"rewound\", \"rewoundAt\": <RFC 3339 time>}}}}"
        );
    }
    Ok(())
}

/// Each message's row is exactly as it was before the last operation.
#[then(expr = "messages {string} are untouched")]
async fn untouched(world: &mut RewindWorld, ids: String) -> anyhow::Result<()> {
    let before = world.before_snapshot()?;
    let rows = before
        .tables
        .get("scope_messages")
        .cloned()
        .unwrap_or_default();
    for id in id_list(&ids) {
        let now: String =
            sqlx::query_scalar("SELECT to_jsonb(m)::text FROM scope_messages m WHERE id = $1")
                .bind(&id)
                .fetch_optional(world.pool()?)
                .await
                .context("reading scope_messages")?
                .ok_or_else(|| anyhow!("scope_messages row `{id}` is gone"))?;
        if !rows.contains(&now) {
            let was = rows
                .iter()
                .find(|r| r.contains(&format!("\"id\": \"{id}\"")))
                .cloned()
                .unwrap_or_default();
            bail!(
                "scope_messages row `{id}` changed:\n{}",
                line_diff(&was, &now)
            );
        }
    }
    Ok(())
}

/// The operation of the last rewind is recorded with this status, on the primary scope.
#[then(expr = "the rewind operation has status {string}")]
async fn operation_status(world: &mut RewindWorld, expected: String) -> anyhow::Result<()> {
    let (request, response) = world
        .last
        .as_ref()
        .ok_or_else(|| anyhow!("no rewind was attempted in this scenario"))?;
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT id, thread_id, status FROM rewind_operations WHERE target_message_id = $1 \
         ORDER BY created_at",
    )
    .bind(&request.target_message_id)
    .fetch_all(world.pool()?)
    .await
    .context("reading rewind_operations")?;
    let (id, thread_id, status) = rows.last().ok_or_else(|| {
        anyhow!(
            "no rewind_operations row targets `{}`",
            request.target_message_id
        )
    })?;
    ensure!(
        *status == expected,
        "rewind_operations.status of `{id}` is `{status}`, expected `{expected}`"
    );
    ensure!(
        *thread_id == request.scope_id,
        "rewind_operations.thread_id of `{id}` is `{thread_id}`, expected the primary scope `{}`",
        request.scope_id
    );
    let reported = match response {
        RewindResponse::Completed { operation_id, .. } => Some(operation_id),
        RewindResponse::Refused { operation_id, .. } => operation_id.as_ref(),
    };
    if let Some(reported) = reported {
        ensure!(
            reported == id,
            "the answer names operation `{reported}`, but the recorded one is `{id}`"
        );
    }
    Ok(())
}

/// No `rewind_operations` row exists at all.
#[then("no rewind operation is recorded")]
async fn no_operation(world: &mut RewindWorld) -> anyhow::Result<()> {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM rewind_operations")
        .fetch_one(world.pool()?)
        .await
        .context("counting rewind_operations")?;
    ensure!(n == 0, "{n} rewind_operations rows exist, expected none");
    Ok(())
}

/// `Then the "scope_messages" rows where "scope_id" is "dm-1" are:` followed by a table whose
/// header names the columns; rows are compared as text, sorted (write them in that order).
#[then(regex = r#"^the "([a-z_]+)" rows where "([a-z_]+)" is "([^"]*)" are:$"#)]
async fn rows_are(
    world: &mut RewindWorld,
    step: &Step,
    table: String,
    column: String,
    value: String,
) -> anyhow::Result<()> {
    let data = step
        .table
        .as_ref()
        .ok_or_else(|| anyhow!("this step needs a data table whose header names the columns"))?;
    let header = data
        .rows
        .first()
        .ok_or_else(|| anyhow!("the data table is empty"))?;
    let pool = world.pool()?;
    let known: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name = $1",
    )
    .bind(&table)
    .fetch_all(pool)
    .await
    .context("reading the schema")?;
    ensure!(!known.is_empty(), "table `{table}` is not a spec table");
    for name in header.iter().chain(std::iter::once(&column)) {
        ensure!(
            known.contains(name),
            "column `{table}.{name}` does not exist (columns: {})",
            known.join(", ")
        );
    }
    let select: Vec<String> = header
        .iter()
        .map(|c| format!("coalesce(t.\"{c}\"::text, '<null>')"))
        .collect();
    let sql = format!(
        "SELECT ARRAY[{}] FROM \"{table}\" t WHERE t.\"{column}\"::text = $1 ORDER BY 1",
        select.join(", ")
    );
    let actual: Vec<Vec<String>> = sqlx::query_scalar(AssertSqlSafe(sql))
        .bind(&value)
        .fetch_all(pool)
        .await
        .with_context(|| format!("reading `{table}`"))?;
    let render = |rows: &[Vec<String>]| {
        rows.iter()
            .map(|r| format!("| {} |", r.join(" | ")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let expected = render(&data.rows[1..]);
    let actual = render(&actual);
    ensure!(
        expected == actual,
        "rows of `{table}` where `{column}` = `{value}` differ (columns: {}):\n{}",
        header.join(", "),
        line_diff(&expected, &actual)
    );
    Ok(())
}

/// `Then scope "th-1" is archived` / `is not archived`.
#[then(regex = r#"^scope "([^"]+)" is (not )?archived$"#)]
async fn scope_archived(
    world: &mut RewindWorld,
    scope: String,
    negated: String,
) -> anyhow::Result<()> {
    let archived: Option<bool> =
        sqlx::query_scalar("SELECT archived_at IS NOT NULL FROM scopes WHERE id = $1")
            .bind(&scope)
            .fetch_optional(world.pool()?)
            .await
            .context("reading scopes")?;
    let archived = archived
        .ok_or_else(|| anyhow!("scope `{scope}` does not exist (it must never be deleted)"))?;
    let want = negated.is_empty();
    ensure!(
        archived == want,
        "scopes.archived_at of `{scope}` is {}, expected it {}",
        if archived { "set" } else { "NULL" },
        if want { "set" } else { "NULL" }
    );
    Ok(())
}

/// `latest_seq` / `latest_global_seq` of the scope are at least what they were before.
#[then(expr = "the high-water marks of scope {string} did not go down")]
async fn high_water_kept(world: &mut RewindWorld, scope: String) -> anyhow::Result<()> {
    let before = world.before_snapshot()?;
    let was = before
        .tables
        .get("scopes")
        .into_iter()
        .flatten()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .find(|r| r.get("id").and_then(|v| v.as_str()) == Some(scope.as_str()))
        .ok_or_else(|| anyhow!("scope `{scope}` did not exist before"))?;
    let (seq, gseq): (i64, i64) =
        sqlx::query_as("SELECT latest_seq, latest_global_seq FROM scopes WHERE id = $1")
            .bind(&scope)
            .fetch_one(world.pool()?)
            .await
            .context("reading scopes")?;
    let old_seq = was.get("latest_seq").and_then(|v| v.as_i64()).unwrap_or(0);
    let old_gseq = was
        .get("latest_global_seq")
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    ensure!(
        seq >= old_seq && gseq >= old_gseq,
        "scopes `{scope}`: latest_seq {old_seq} -> {seq}, latest_global_seq {old_gseq} -> {gseq}; \
         high-water marks must never go down"
    );
    Ok(())
}

type Time = Option<chrono::DateTime<chrono::Utc>>;

/// `visible_message_count`, `latest_message_at` and `visible_last_message_at` match the scope's
/// non-rewound messages.
#[then(expr = "the visible summary of scope {string} counts only its non-rewound messages")]
async fn visible_summary(world: &mut RewindWorld, scope: String) -> anyhow::Result<()> {
    let row: (i32, Time, Time, i64, Time) = sqlx::query_as(
        "SELECT s.visible_message_count, s.latest_message_at, s.visible_last_message_at, \
                    (SELECT count(*) FROM scope_messages m WHERE m.scope_id = s.id \
                       AND coalesce(m.metadata #>> '{messageRecall,status}', '') <> 'rewound'), \
                    (SELECT max(m.created_at) FROM scope_messages m WHERE m.scope_id = s.id \
                       AND coalesce(m.metadata #>> '{messageRecall,status}', '') <> 'rewound') \
             FROM scopes s WHERE s.id = $1",
    )
    .bind(&scope)
    .fetch_optional(world.pool()?)
    .await
    .context("reading scopes")?
    .ok_or_else(|| anyhow!("scope `{scope}` does not exist"))?;
    let (count, latest_at, visible_at, visible, last_at) = row;
    ensure!(
        i64::from(count) == visible,
        "scopes.visible_message_count of `{scope}` is {count}, but it has {visible} non-rewound messages"
    );
    ensure!(
        latest_at == last_at && visible_at == last_at,
        "scopes `{scope}`: latest_message_at {latest_at:?} and visible_last_message_at {visible_at:?} \
         should both be the last non-rewound message's time {last_at:?}"
    );
    Ok(())
}

/// The operation recorded for the rewind targeting this message has this status.
#[then(expr = "the operation targeting {string} is {string}")]
async fn operation_targeting(
    world: &mut RewindWorld,
    message: String,
    expected: String,
) -> anyhow::Result<()> {
    let statuses: Vec<String> = sqlx::query_scalar(
        "SELECT status FROM rewind_operations WHERE target_message_id = $1 ORDER BY created_at",
    )
    .bind(&message)
    .fetch_all(world.pool()?)
    .await
    .context("reading rewind_operations")?;
    ensure!(
        statuses.last() == Some(&expected),
        "rewind_operations targeting `{message}`: statuses {statuses:?}, expected the last to be `{expected}`"
    );
    Ok(())
}

/// Every recorded operation has one of the spec's four statuses.
#[then("every rewind operation has a status of the spec")]
async fn statuses_in_set(world: &mut RewindWorld) -> anyhow::Result<()> {
    let statuses: Vec<String> = sqlx::query_scalar("SELECT DISTINCT status FROM rewind_operations")
        .fetch_all(world.pool()?)
        .await
        .context("reading rewind_operations")?;
    let odd: Vec<&String> = statuses
        .iter()
        .filter(|s| !["preparing", "completed", "failed", "repair_required"].contains(&s.as_str()))
        .collect();
    ensure!(
        odd.is_empty(),
        "rewind_operations.status values outside the spec's set: {odd:?}"
    );
    Ok(())
}

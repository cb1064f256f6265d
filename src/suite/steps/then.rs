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

/// Checks the code of a refusal the scenario accepted: one code per section 9 error and
/// distinct errors distinct codes within the scenario, and the profile's code where it declares
/// one; then records it for the run's comparison across scenarios (a finding of the run, never
/// of this scenario, so that its verdict does not depend on what else ran). Section 9 defines
/// messages only; the catalog's codes are the reference's recommendations.
pub(super) fn check_code(world: &RewindWorld, message: &str, code: &str) -> anyhow::Result<()> {
    let ctx = context()?;
    let rule = ctx.catalog.error_by_message(message);
    let declared = rule.and_then(|r| ctx.applicability.profile().error_codes.get(&r.id));
    world
        .codes
        .lock()
        .map_err(|_| anyhow!("the scenario's code table is poisoned"))?
        .observe(
            message,
            code,
            rule.is_some(),
            declared.map(String::as_str),
            &world.scenario,
        )
        .map_err(|e| anyhow!(e))?;
    ctx.codes
        .lock()
        .map_err(|_| anyhow!("the run's code table is poisoned"))?
        .record(message, code, rule.is_some(), &world.scenario);
    Ok(())
}

/// The answer is a refusal with exactly this section 9 message; its code only has to be
/// consistent within the run (see [`check_code`]).
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
    check_code(world, message, code)
}

/// The answer is a refusal with either message (where the spec does not say which of two
/// guards that both apply refuses first, ambiguity `guard-order`).
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
    let RewindResponse::Refused { .. } = response else {
        bail!("expected a refusal, but {}", describe(response));
    };
    // Used for the refusals section 9 does not word (register entry `unworded-refusals`): any
    // message and any code, a section 9 message and its code included; nothing to record.
    Ok(())
}

/// The answer is a completed operation, and the section 10 invariants hold.
#[then("the rewind completes")]
pub(super) async fn completes(world: &mut RewindWorld) -> anyhow::Result<()> {
    let response = world.last_response()?;
    match response {
        RewindResponse::Completed { status, .. } if status == "completed" => {}
        other => bail!("expected the rewind to complete, but {}", describe(other)),
    }
    super::invariants::check_after_rewind(world).await
}

/// After a refusal, `rewind_operations` may have gained rows recording it as `failed` (ambiguity
/// `refusal-records-operation`): the ids of such rows, or an error naming any other change.
fn refusal_operations(
    world: &RewindWorld,
    before: &[String],
    after: &[String],
) -> anyhow::Result<Vec<String>> {
    let parse = |r: &String| serde_json::from_str::<serde_json::Value>(r).unwrap_or_default();
    let removed: Vec<&String> = before.iter().filter(|r| !after.contains(r)).collect();
    ensure!(
        removed.is_empty(),
        "rewind_operations rows changed or went away:\n{}",
        line_diff(&before.join("\n"), &after.join("\n"))
    );
    let added: Vec<serde_json::Value> = after
        .iter()
        .filter(|r| !before.contains(r))
        .map(parse)
        .collect();
    if added.is_empty() {
        return Ok(Vec::new());
    }
    let refused = matches!(world.last_response()?, RewindResponse::Refused { .. });
    let (request, _) = world
        .last
        .as_ref()
        .ok_or_else(|| anyhow!("no rewind was attempted"))?;
    let mut ids = Vec::new();
    for row in &added {
        let field = |k: &str| row.get(k).and_then(|v| v.as_str()).unwrap_or_default();
        ensure!(
            refused
                && field("status") == "failed"
                && field("target_message_id") == request.target_message_id,
            "the refused rewind left a rewind_operations row other than a `failed` record of its \
             own target `{}`: {row}",
            request.target_message_id
        );
        ids.push(field("id").to_owned());
    }
    Ok(ids)
}

/// What changed in the database since the snapshot before the last operation, every table
/// but `rewind_operations` and `ignored` (a unified diff, empty when nothing did), and the
/// `rewind_operations` rows before and now.
pub(super) async fn changes_since_before(
    world: &RewindWorld,
    ignored: &[&str],
) -> anyhow::Result<(String, Vec<String>, Vec<String>)> {
    let mut before = world.before_snapshot()?.clone();
    let mut after = world.snapshot().await?;
    let was = before
        .tables
        .remove("rewind_operations")
        .unwrap_or_default();
    let now = after.tables.remove("rewind_operations").unwrap_or_default();
    for table in ignored {
        before.tables.remove(*table);
        after.tables.remove(*table);
    }
    Ok((before.diff(&after), was, now))
}

/// Every table holds exactly the rows it held before the last operation; after a refusal,
/// `rewind_operations` may also hold a `failed` record of it.
#[then("the database is unchanged")]
async fn database_unchanged(world: &mut RewindWorld) -> anyhow::Result<()> {
    let (diff, was, now) = changes_since_before(world, &[]).await?;
    ensure!(diff.is_empty(), "the database changed:\n{diff}");
    let failed = refusal_operations(world, &was, &now)?;
    if matches!(world.last_response()?, RewindResponse::Refused { .. }) {
        world.take_reading(
            "refusal-records-operation",
            if failed.is_empty() {
                "no-operation"
            } else {
                "failed-operation"
            },
        )?;
    }
    Ok(())
}

/// Where a tombstone keeps `rewoundAt` (ambiguity `tombstone-rewound-at`): inside
/// `messageRecall` or beside it. The time is an RFC 3339 string either way.
pub(super) fn tombstone_reading(metadata: &serde_json::Value) -> Option<&'static str> {
    let top = metadata.as_object()?;
    let recall = top.get("messageRecall")?.as_object()?;
    let time = |v: Option<&serde_json::Value>| {
        v.and_then(|s| s.as_str())
            .is_some_and(|s| chrono::DateTime::parse_from_rfc3339(s).is_ok())
    };
    if recall.get("status").and_then(|s| s.as_str()) != Some("rewound") {
        return None;
    }
    match (top.len(), recall.len()) {
        (1, 2) if time(recall.get("rewoundAt")) => Some("inside-message-recall"),
        (2, 1) if time(top.get("rewoundAt")) => Some("beside-message-recall"),
        _ => None,
    }
}

/// Each message still exists, with content `''` and metadata holding only the rewound marker
/// `messageRecall.status = "rewound"` and `rewoundAt` (spec section 6.1).
#[then(expr = "messages {string} are rewound tombstones")]
pub(super) async fn are_tombstones(world: &mut RewindWorld, ids: String) -> anyhow::Result<()> {
    let pool = world.pool()?.clone();
    let ids: Vec<String> = id_list(&ids).iter().map(|n| world.resolve(n)).collect();
    for id in ids {
        let row: Option<(String, serde_json::Value)> =
            sqlx::query_as("SELECT content, metadata FROM scope_messages WHERE id = $1")
                .bind(&id)
                .fetch_optional(&pool)
                .await
                .context("reading scope_messages")?;
        let (content, metadata) = row.ok_or_else(|| {
            anyhow!("scope_messages row `{id}` is gone: a rewind must tombstone, never delete")
        })?;
        ensure!(
            content.is_empty(),
            "scope_messages.content of `{id}` is {content:?}, expected ''"
        );
        let reading = tombstone_reading(&metadata).ok_or_else(|| {
            anyhow!(
                "scope_messages.metadata of `{id}` is {metadata}, expected only \
                 `messageRecall.status = \"rewound\"` and an RFC 3339 `rewoundAt` (inside \
                 `messageRecall` or beside it)"
            )
        })?;
        world.take_reading("tombstone-rewound-at", reading)?;
    }
    Ok(())
}

/// Each message's row is exactly as it was before the last operation.
#[then(expr = "messages {string} are untouched")]
pub(super) async fn untouched(world: &mut RewindWorld, ids: String) -> anyhow::Result<()> {
    let before = world.before_snapshot()?;
    let rows = before
        .tables
        .get("scope_messages")
        .cloned()
        .unwrap_or_default();
    for id in id_list(&ids).iter().map(|n| world.resolve(n)) {
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

/// The refusal left no operation behind, or only a `failed` record of itself (ambiguity
/// `refusal-records-operation`); never one that is `preparing`, `completed` or needs repair.
#[then("no rewind operation is recorded but a failed one")]
pub(super) async fn no_operation(world: &mut RewindWorld) -> anyhow::Result<()> {
    let was = world
        .before_snapshot()?
        .tables
        .get("rewind_operations")
        .cloned()
        .unwrap_or_default();
    let now = world
        .snapshot()
        .await?
        .tables
        .remove("rewind_operations")
        .unwrap_or_default();
    let failed = refusal_operations(world, &was, &now)?;
    world.take_reading(
        "refusal-records-operation",
        if failed.is_empty() {
            "no-operation"
        } else {
            "failed-operation"
        },
    )
}

/// `Then the "scope_messages" rows where "scope_id" is "dm-1" are:` followed by a table whose
/// header names the columns; rows are compared as text, sorted (write them in that order).
///
/// With `, by ambiguity "<id>"` a cell may read `A or B`: the register entry's first reading
/// expects `A`, its second `B` (and so on); every such cell of the table must agree on one
/// reading. `<notice>` in a cell stands for the seq of the last rewind's notice, `<notice at>`
/// for its creation time.
#[then(
    regex = r#"^the "([a-z_]+)" rows where "([a-z_]+)" is "([^"]*)" are(?:, by ambiguity "([a-z0-9-]+)")?:$"#
)]
async fn rows_are(
    world: &mut RewindWorld,
    step: &Step,
    table: String,
    column: String,
    value: String,
    ambiguity: String,
) -> anyhow::Result<()> {
    let ambiguity = Some(ambiguity).filter(|a| !a.is_empty());
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
    let expected_rows = match &ambiguity {
        None => data.rows[1..].to_vec(),
        Some(id) => {
            let (rows, reading) = pick_reading(world, id, &data.rows[1..], &actual).await?;
            world.take_reading(id, &reading)?;
            rows
        }
    };
    let expected = render(&expected_rows);
    let actual = render(&actual);
    ensure!(
        expected == actual,
        "rows of `{table}` where `{column}` = `{value}` differ (columns: {}):\n{}",
        header.join(", "),
        line_diff(&expected, &actual)
    );
    Ok(())
}

/// The seq and the creation time (as text) of the last rewind's notice
/// (`rewind-notice:<operation id>`).
async fn notice_seq(world: &RewindWorld) -> anyhow::Result<(String, String)> {
    let operation = match world.last_response()? {
        RewindResponse::Completed { operation_id, .. } => operation_id.clone(),
        other => bail!(
            "`<notice>` needs a completed rewind, but {}",
            describe(other)
        ),
    };
    let row: Option<(i64, String)> = sqlx::query_as(
        "SELECT seq, created_at::text FROM scope_messages WHERE client_message_id = $1",
    )
    .bind(format!("rewind-notice:{operation}"))
    .fetch_optional(world.pool()?)
    .await
    .context("reading the rewind notice")?;
    let (seq, at) =
        row.ok_or_else(|| anyhow!("the rewind posted no notice `rewind-notice:{operation}`"))?;
    Ok((seq.to_string(), at))
}

/// Resolves `A or B` cells: the expected rows under the first reading whose alternatives all
/// match `actual` (row by row, in order), and that reading's id. When none matches, the rows of
/// the first reading are returned so the diff shows the recommended expectation.
async fn pick_reading(
    world: &RewindWorld,
    id: &str,
    rows: &[Vec<String>],
    actual: &[Vec<String>],
) -> anyhow::Result<(Vec<Vec<String>>, String)> {
    let ctx = context()?;
    let entry = ctx.register.get(id).ok_or_else(|| {
        anyhow!(
            "ambiguity `{id}` is not in {}",
            ctx.register.path().display()
        )
    })?;
    let notice = if rows.iter().flatten().any(|c| c.contains("<notice")) {
        Some(notice_seq(world).await?)
    } else {
        None
    };
    let choose = |k: usize| -> anyhow::Result<Vec<Vec<String>>> {
        rows.iter()
            .map(|row| {
                row.iter()
                    .map(|cell| {
                        let options: Vec<&str> = cell.split(" or ").collect();
                        let pick = if options.len() == 1 {
                            options[0]
                        } else {
                            *options.get(k).ok_or_else(|| {
                                anyhow!("cell `{cell}` has no alternative for reading #{}", k + 1)
                            })?
                        };
                        Ok(match &notice {
                            Some((seq, at)) => {
                                pick.replace("<notice>", seq).replace("<notice at>", at)
                            }
                            None => pick.to_owned(),
                        })
                    })
                    .collect()
            })
            .collect()
    };
    let width = rows
        .iter()
        .flatten()
        .map(|c| c.split(" or ").count())
        .max()
        .unwrap_or(1);
    ensure!(
        width == entry.readings.len(),
        "the cells of this table offer {width} alternatives, but ambiguity `{id}` has {} readings",
        entry.readings.len()
    );
    for (k, reading) in entry.readings.iter().enumerate() {
        let candidate = choose(k)?;
        if candidate == actual {
            return Ok((candidate, reading.id.clone()));
        }
    }
    Ok((choose(0)?, entry.readings[0].id.clone()))
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
/// non-rewound messages; a scope with none left (a cascaded thread) counts 0 and has both times
/// NULL.
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
    let want = match last_at {
        Some(at) => format!("the last non-rewound message's time {at}"),
        None => "NULL, as no message of the scope is left unrewound".to_owned(),
    };
    ensure!(
        latest_at == last_at && visible_at == last_at,
        "scopes `{scope}`: latest_message_at {latest_at:?} and visible_last_message_at {visible_at:?} \
         should both be {want}"
    );
    Ok(())
}

/// The statuses of the operations targeting `message`, oldest first.
pub(super) async fn statuses_targeting(
    world: &RewindWorld,
    message: &str,
) -> anyhow::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT status FROM rewind_operations WHERE target_message_id = $1 ORDER BY created_at",
    )
    .bind(message)
    .fetch_all(world.pool()?)
    .await
    .context("reading rewind_operations")
}

/// The operation recorded for the rewind targeting this message has this status.
#[then(expr = "the operation targeting {string} is {string}")]
async fn operation_targeting(
    world: &mut RewindWorld,
    message: String,
    expected: String,
) -> anyhow::Result<()> {
    let statuses = statuses_targeting(world, &message).await?;
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

/// Section 4 cascades "the target's own reply thread when the target is the tail fork" and
/// blocks a fork that is not the suffix's last main-line message; a thread on the suffix's last
/// message below an earlier target is covered by neither bullet (ambiguity
/// `tail-fork-below-target`). Cascading it (its messages tombstoned, the thread archived) and
/// refusing as a later reply thread (nothing changed) both pass.
#[then(
    regex = r#"^the rewind cascades into the tail thread "([^"]+)", tombstoning "([^"]+)", or is refused for the later reply thread$"#
)]
async fn cascades_or_refuses(
    world: &mut RewindWorld,
    thread: String,
    ids: String,
) -> anyhow::Result<()> {
    if matches!(world.last_response()?, RewindResponse::Refused { .. }) {
        refused_with(
            world,
            "rewind is blocked because a later message has a reply thread".to_owned(),
        )
        .await?;
        database_unchanged(world).await?;
        return world.take_reading("tail-fork-below-target", "refuse");
    }
    completes(world).await?;
    are_tombstones(world, ids).await?;
    scope_archived(world, thread, String::new()).await?;
    world.take_reading("tail-fork-below-target", "cascade")
}

/// While a started rewind waits on the scope's row lock: it either persisted its plan as
/// `preparing` before asking for the lock, or asks for the lock before planning and so has
/// recorded nothing yet (ambiguity `plan-persist-vs-scope-lock`).
#[then(expr = "the operation targeting {string} is {string}, or not yet recorded")]
async fn operation_or_not_yet(
    world: &mut RewindWorld,
    message: String,
    expected: String,
) -> anyhow::Result<()> {
    let statuses = statuses_targeting(world, &message).await?;
    let reading = match statuses.as_slice() {
        [] => "plan-under-lock",
        [status] if *status == expected => "plan-before-lock",
        _ => bail!(
            "rewind_operations targeting `{message}`: statuses {statuses:?}, expected one \
             `{expected}` or none yet"
        ),
    };
    world.take_reading("plan-persist-vs-scope-lock", reading)
}

/// `Then the rewind created or dropped no table`: the rewind keeps the tombstone marker in
/// `scope_messages.metadata` and needs no hidden-range or audit table (spec 1). Compares every
/// table of the `public` schema with the snapshot taken just before the rewind.
#[then("the rewind created or dropped no table")]
async fn no_new_table(world: &mut RewindWorld) -> anyhow::Result<()> {
    let before: std::collections::BTreeSet<String> =
        world.before_snapshot()?.tables.keys().cloned().collect();
    let mut conn = world
        .pool()?
        .acquire()
        .await
        .context("acquiring a connection")?;
    let now: std::collections::BTreeSet<String> =
        rewind_conformance::inspect::spec_tables(&mut conn)
            .await
            .context("listing the tables")?
            .into_iter()
            .collect();
    let created: Vec<&String> = now.difference(&before).collect();
    let dropped: Vec<&String> = before.difference(&now).collect();
    anyhow::ensure!(
        created.is_empty() && dropped.is_empty(),
        "the rewind created tables {created:?} and dropped tables {dropped:?}: rewind keeps no \
         hidden-range or audit table on the message side (spec 1)"
    );
    Ok(())
}

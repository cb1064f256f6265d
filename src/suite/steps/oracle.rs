//! The spec model as a step: what the implementation did with the last rewind is judged against
//! every outcome the oracle ([`rewind_conformance::oracle`]) derives from the spec for the
//! database as it was before, and the state after it must keep the invariants of any sequence of
//! rewinds. Generated cases end with it; any scenario may.

use anyhow::{anyhow, bail, Context as _};
use cucumber::then;
use rewind_conformance::oracle::{
    consistency, judge, predict, Deployment, Judgement, Prediction, State,
};
use rewind_conformance::sut::RewindResponse;

use crate::suite::world::{context, RewindWorld};

/// The step's text, which also keeps a scenario out of the capability profile's rewrite: the
/// oracle knows which runtimes the implementation restores.
pub const ORACLE_STEP: &str = "the outcome is what the spec model predicts";

/// `Then the outcome is what the spec model predicts`.
#[then("the outcome is what the spec model predicts")]
async fn as_predicted(world: &mut RewindWorld) -> anyhow::Result<()> {
    let ctx = context()?;
    let (request, answer) = world
        .last
        .clone()
        .ok_or_else(|| anyhow!("no rewind was answered in this scenario"))?;
    let before = State::from_snapshot(world.before_snapshot()?)
        .context("reading the database before the rewind")?;
    let after_snapshot = world.snapshot().await?;
    let after = State::from_snapshot(&after_snapshot).context("reading the database after it")?;
    let deployment = Deployment::for_profile(ctx.applicability.profile());
    let prediction = predict(&before, &request, &deployment);
    if let Judgement::Wrong {
        discrepancies,
        readings,
    } = judge(&before, &after, &answer, &prediction)
    {
        let lines: Vec<String> = discrepancies.iter().map(ToString::to_string).collect();
        let taken: Vec<String> = readings
            .iter()
            .map(|(id, r)| format!("{id}: {}", r.iter().cloned().collect::<Vec<_>>().join("|")))
            .collect();
        bail!(
            "the rewind's outcome is none the spec allows:\n  {}\nthe spec allows: {}\n\
             (the closest allowed outcome was judged under the readings {})",
            lines.join("\n  "),
            allowed(&prediction),
            if taken.is_empty() {
                "of no register entry".to_owned()
            } else {
                taken.join(", ")
            }
        );
    }
    let violations = consistency(&after, Some(&before));
    if !violations.is_empty() {
        let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
        bail!(
            "the state after the rewind breaks the invariants:\n  {}",
            lines.join("\n  ")
        );
    }
    if let RewindResponse::Completed { .. } = answer {
        super::invariants::check_after_rewind(world).await?;
    }
    Ok(())
}

/// The outcomes a prediction allows, in a line each.
fn allowed(prediction: &Prediction) -> String {
    let mut lines = Vec::new();
    for (refusal, _) in prediction.refusals() {
        lines.push(format!("refused with {}", refusal.texts));
    }
    for (effect, _) in prediction.completions() {
        let cascades: Vec<String> = effect
            .cascades
            .iter()
            .map(|c| format!("`{}` ({})", c.scope_id, c.message_ids.join(", ")))
            .collect();
        lines.push(format!(
            "completed, tombstoning {} of `{}`{}",
            effect.primary.message_ids.join(", "),
            effect.primary.scope_id,
            if cascades.is_empty() {
                String::new()
            } else {
                format!(" and cascading {}", cascades.join(", "))
            }
        ));
    }
    lines.join("; or ")
}

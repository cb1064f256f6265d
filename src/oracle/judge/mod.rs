//! [`judge`]: whether what an implementation did after one rewind request is an outcome the
//! [`Prediction`] allows, and if not, where it differs.

mod collector;
mod completion;
mod operation;
mod projections;
mod read_state;
mod refusal;
mod report;
mod transcript;

pub use report::{Discrepancy, Judgement, Place};
pub(crate) use transcript::tombstone_reading;

use rewind_driver_protocol::RewindResponse;

use super::predict::Prediction;
use super::readings::Readings;
use super::state::State;
use collector::Collector;

/// Judges the `answer` an implementation gave and the state `after` it left, the state
/// `before` the request having produced `prediction`.
///
/// A refusal must carry an acceptable message and leave the database as it was (one `failed`
/// operation of its own aside, register `refusal-records-operation`). A completion must match
/// one allowed effect in every spec table (see the checks of each table) and name its
/// operation. When several outcomes are allowed, the first that matches wins; when none does,
/// the discrepancies of the closest are reported.
pub fn judge(
    before: &State,
    after: &State,
    answer: &RewindResponse,
    prediction: &Prediction,
) -> Judgement {
    let mut best: Option<(Vec<Discrepancy>, Readings)> = None;
    let mut consider = |c: &mut Collector, alternative: &Readings| -> Option<Judgement> {
        let mut readings = alternative.clone();
        readings.merge(&c.finish());
        let discrepancies = std::mem::take(&mut c.discrepancies);
        if discrepancies.is_empty() {
            return Some(Judgement::Ok { readings });
        }
        if best
            .as_ref()
            .is_none_or(|(fewest, _)| discrepancies.len() < fewest.len())
        {
            best = Some((discrepancies, readings));
        }
        None
    };
    match answer {
        RewindResponse::Refused {
            message,
            operation_id,
            ..
        } => {
            let mut fitting = false;
            for (refusal, readings) in prediction.refusals() {
                if !refusal.texts.accepts(message) {
                    continue;
                }
                fitting = true;
                let mut c = Collector::default();
                refusal::database(
                    &mut c,
                    before,
                    after,
                    &prediction.request,
                    refusal,
                    operation_id.as_deref(),
                );
                if let Some(ok) = consider(&mut c, readings) {
                    return ok;
                }
            }
            if !fitting {
                let mut c = Collector::default();
                let allowed: Vec<String> = prediction
                    .refusals()
                    .map(|(refusal, _)| refusal.texts.to_string())
                    .collect();
                let mut expected = Vec::new();
                if !allowed.is_empty() {
                    expected.push(format!("a refusal with {}", allowed.join(", or ")));
                }
                if prediction.completions().next().is_some() {
                    expected.push(completion_expected(prediction));
                }
                let expected = expected.join(", or ");
                c.wrong(
                    Place::Answer {
                        field: "message".to_owned(),
                    },
                    expected,
                    format!("a refusal with `{message}`"),
                );
                consider(&mut c, &Readings::new());
            }
        }
        RewindResponse::Completed { .. } => {
            let mut any = false;
            for (effect, readings) in prediction.completions() {
                any = true;
                let mut c = Collector::default();
                completion::judge(&mut c, before, after, answer, effect);
                if let Some(ok) = consider(&mut c, readings) {
                    return ok;
                }
            }
            if !any {
                let mut c = Collector::default();
                let allowed: Vec<String> = prediction
                    .refusals()
                    .map(|(refusal, _)| refusal.texts.to_string())
                    .collect();
                c.wrong(
                    Place::Answer {
                        field: "outcome".to_owned(),
                    },
                    format!("a refusal with {}", allowed.join(", or ")),
                    "`completed`",
                );
                consider(&mut c, &Readings::new());
            }
        }
    }
    let (mut discrepancies, readings) = best.unwrap_or_default();
    discrepancies.sort();
    discrepancies.dedup();
    Judgement::Wrong {
        discrepancies,
        readings,
    }
}

fn completion_expected(prediction: &Prediction) -> String {
    let targets: Vec<String> = prediction
        .completions()
        .map(|(effect, _)| {
            effect
                .rewound_ids()
                .iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    format!(
        "the rewind to complete, tombstoning {}",
        targets.join(", or ")
    )
}

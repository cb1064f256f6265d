//! Judging a completion against one allowed [`Effect`]: every spec table, row by row.

use std::collections::{BTreeMap, BTreeSet};

use rewind_driver_protocol::RewindResponse;

use super::collector::{keys, Collector};
use super::{operation, projections, read_state, refusal, transcript};
use crate::oracle::predict::Effect;
use crate::oracle::state::{Message, State};
use crate::oracle::text::SuffixText;

/// What every completion check needs.
pub(crate) struct Ctx<'a> {
    /// The state before the rewind.
    pub before: &'a State,
    /// The state after it.
    pub after: &'a State,
    /// The effect judged against.
    pub effect: &'a Effect,
    /// Every message to tombstone.
    pub rewound: BTreeSet<String>,
    /// The scopes tombstoned in: the primary scope and the cascades.
    pub scopes: BTreeSet<String>,
    /// The cascades' parent messages.
    pub cascade_parents: BTreeSet<String>,
    /// The rewind notice, when one was found.
    pub notice: Option<&'a Message>,
    /// The text of the rewound messages.
    pub text: SuffixText,
    /// Each tombstone scope's visible tail before the notice: `(seq, global_seq)` of its last
    /// surviving message, `(0, 0)` when none survives.
    pub tails: BTreeMap<String, (i64, i64)>,
}

impl Ctx<'_> {
    /// The visible tail of `scope` once the suffix is gone, before the notice.
    pub fn tail(&self, scope: &str) -> (i64, i64) {
        self.tails.get(scope).copied().unwrap_or((0, 0))
    }

    /// The messages of `scope` that survive the rewind (visible before, not rewound by it),
    /// as they were before.
    pub fn survivors<'s>(&'s self, scope: &'s str) -> impl Iterator<Item = &'s Message> + 's {
        self.before
            .visible_messages(scope)
            .filter(|m| !self.rewound.contains(&m.id))
    }
}

/// Checks the database and the answer after a rewind that completed, against `effect`.
pub(crate) fn judge(
    c: &mut Collector,
    before: &State,
    after: &State,
    answer: &RewindResponse,
    effect: &Effect,
) {
    let rewound: BTreeSet<String> = effect.rewound_ids().into_iter().collect();
    let operation_id = operation::check(c, before, after, answer, effect, &rewound);
    let notice = transcript::find_notice(c, before, after, operation_id.as_deref());
    let mut ctx = Ctx {
        before,
        after,
        effect,
        scopes: effect.tombstone_scopes().into_iter().collect(),
        cascade_parents: effect
            .cascades
            .iter()
            .map(|c| c.parent_message_id.clone())
            .collect(),
        notice,
        text: SuffixText::of(before, &rewound),
        rewound,
        tails: BTreeMap::new(),
    };
    let tails: BTreeMap<String, (i64, i64)> = ctx
        .scopes
        .iter()
        .map(|scope| {
            let tail = ctx
                .survivors(scope)
                .fold((0, 0), |(s, g), m| (s.max(m.seq), g.max(m.global_seq)));
            (scope.clone(), tail)
        })
        .collect();
    ctx.tails = tails;
    transcript::check(c, &ctx);
    read_state::check(c, &ctx);
    projections::check(c, &ctx);
    for name in ["users", "machines", "scope_private_grants"] {
        let (was, now) = (before.table(name), after.table(name));
        for key in keys(was, now) {
            c.unchanged(name, key, was.get(key), now.get(key), &[]);
        }
    }
    refusal::extra_tables(c, before, after);
}

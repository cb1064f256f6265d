//! [`Recipe`]: the random choices a case is built from, and the proptest strategy drawing them.
//!
//! A recipe is only choices (counts, picks, flags); [`super::build`] turns any recipe into a
//! valid case. So proptest can shrink a recipe freely (drop a round, a thread, a family, clear a
//! flag, lower a pick) and every simplification still builds a valid, simpler case.

use proptest::collection::vec;
use proptest::prelude::*;

use super::shape::Aim;

/// The size knobs of generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenConfig {
    /// Other conversations beside the target's, at most.
    pub max_background: usize,
    /// Humans besides the initiator, at most (at least one).
    pub max_other_humans: usize,
    /// Agents per conversation, at most.
    pub max_agents: usize,
    /// Cold rounds (a human message and its replies) at the start of a conversation, at most.
    pub max_cold_rounds: usize,
    /// Rounds before the target round, at most.
    pub max_prefix_rounds: usize,
    /// Rounds after the target round, at most.
    pub max_suffix_rounds: usize,
    /// Reply threads on earlier messages per conversation, at most.
    pub max_threads: usize,
    /// Rounds per reply thread, at most (at least one).
    pub max_thread_rounds: usize,
    /// Agent replies to one human message, at most.
    pub max_replies: usize,
}

impl Default for GenConfig {
    /// Small cases: a handful of scopes, up to about forty messages.
    fn default() -> Self {
        GenConfig {
            max_background: 2,
            max_other_humans: 3,
            max_agents: 3,
            max_cold_rounds: 2,
            max_prefix_rounds: 3,
            max_suffix_rounds: 3,
            max_threads: 2,
            max_thread_rounds: 2,
            max_replies: 2,
        }
    }
}

/// Every choice of one case.
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    /// The guard aimed at.
    pub aim: Aim,
    /// A further guard planted in the suffix.
    pub extra: Option<Aim>,
    /// Picks the way a guard is planted.
    pub variant: u8,
    /// Humans besides the initiator.
    pub other_humans: usize,
    /// Picks the initiator among the humans.
    pub initiator: u8,
    /// Picks the target scope kind: 0 DM, 1 channel, 2 reply thread.
    pub target_kind: u8,
    /// The target's conversation.
    pub target: FamilyRecipe,
    /// Other conversations.
    pub background: Vec<FamilyRecipe>,
    /// Picks that interleave threads with their main line and conversations with each other.
    pub merge: Vec<u8>,
    /// A suffix agent took a turn in another scope before the target (allowed by the spec).
    pub early_elsewhere: bool,
    /// Picks for the early turn: where, with whom.
    pub early_pick: u8,
    /// A task-discussion attachment and an unclaimed upload.
    pub loose_attachments: (bool, bool),
    /// The projections of each message, in creation order (messages past the end get none).
    pub projections: Vec<ProjRecipe>,
}

/// One conversation: a DM or channel main line with its reply threads.
#[derive(Debug, Clone)]
pub(crate) struct FamilyRecipe {
    /// A DM (else a channel).
    pub dm: bool,
    /// A DM between two humans (else a human and an agent).
    pub dm_human: bool,
    /// The conversation's agents.
    pub agents: Vec<AgentRecipe>,
    /// Cold rounds first.
    pub cold: Vec<RoundRecipe>,
    /// Rounds before the target round.
    pub prefix: Vec<RoundRecipe>,
    /// The target round (for other conversations: one more round).
    pub target: RoundRecipe,
    /// Rounds after the target round.
    pub suffix: Vec<RoundRecipe>,
    /// When the target is in a reply thread: the thread's rounds before the target round.
    pub thread_prefix: Vec<RoundRecipe>,
    /// Reply threads on earlier messages.
    pub threads: Vec<ThreadRecipe>,
    /// A reply thread on the main line's last message.
    pub tail: Option<ThreadRecipe>,
    /// An earlier rewind's tombstones among the prefix rounds.
    pub tombstones: Option<TombRecipe>,
    /// Scope-level rows: sync-dirty frontiers, cursors, conversation index, scope events.
    pub rows: [bool; 8],
    /// Picks for the scope-level rows.
    pub row_picks: [u8; 4],
}

/// An agent.
#[derive(Debug, Clone)]
pub(crate) struct AgentRecipe {
    /// Picks the runtime among codex, claude, opencode, builtin.
    pub runtime: u8,
    /// On an unsupported runtime instead (only where no rewind reaches it).
    pub unsupported: bool,
    /// Deleted (only where no rewind reaches it).
    pub deleted: bool,
    /// On a deleted machine (only where no rewind reaches it).
    pub machine_gone: bool,
}

/// A round: a human message, the agents' replies, maybe a system-ish or recalled message.
#[derive(Debug, Clone)]
pub(crate) struct RoundRecipe {
    /// Picks the human author among those allowed.
    pub author: u8,
    /// Picks the replying agents.
    pub replies: Vec<u8>,
    /// 0-5 nothing, 6 system, 7 service, 8 app, 9 a recalled message of the author.
    pub extra: u8,
}

/// A reply thread.
#[derive(Debug, Clone)]
pub(crate) struct ThreadRecipe {
    /// Picks the parent message.
    pub parent: u8,
    /// Archived.
    pub archived: bool,
    /// Its rounds.
    pub rounds: Vec<RoundRecipe>,
}

/// An earlier rewind's tombstones.
#[derive(Debug, Clone)]
pub(crate) struct TombRecipe {
    /// Picks the first tombstoned round.
    pub at: u8,
    /// How many rounds it covered (1 or 2).
    pub len: u8,
    /// The earlier rewind cascaded into a (now archived) reply thread.
    pub cascade: bool,
}

/// The projections of one message.
#[derive(Debug, Clone)]
pub(crate) struct ProjRecipe {
    /// Activity event, outbox row, share card, reaction, pin, top notice, search doc, source,
    /// attachment, stream event.
    pub bits: [bool; 10],
    /// Picks for statuses, recipients, emoji, cited messages.
    pub picks: [u8; 4],
}

impl ProjRecipe {
    pub const ACTIVITY: usize = 0;
    pub const OUTBOX: usize = 1;
    pub const SHARE_CARD: usize = 2;
    pub const REACTION: usize = 3;
    pub const PIN: usize = 4;
    pub const TOP_NOTICE: usize = 5;
    pub const SEARCH_DOC: usize = 6;
    pub const SOURCE: usize = 7;
    pub const ATTACHMENT: usize = 8;
    pub const STREAM: usize = 9;
}

/// The aims, [`Aim::Complete`] as likely as all guards together (and first, so that shrinking
/// goes towards it).
fn aim() -> impl Strategy<Value = Aim> {
    let guards = Aim::ALL.len() - 1;
    (0..2 * guards).prop_map(move |n| {
        if n < guards {
            Aim::Complete
        } else {
            Aim::ALL[n - guards + 1]
        }
    })
}

/// A further guard in one case out of five.
fn extra() -> impl Strategy<Value = Option<Aim>> {
    proptest::option::weighted(
        0.2,
        (0..Aim::COMBINABLE.len()).prop_map(|n| Aim::COMBINABLE[n]),
    )
}

fn round(config: &GenConfig) -> impl Strategy<Value = RoundRecipe> {
    (
        any::<u8>(),
        vec(any::<u8>(), 0..=config.max_replies),
        0u8..10,
    )
        .prop_map(|(author, replies, extra)| RoundRecipe {
            author,
            replies,
            extra,
        })
}

fn rounds(
    config: &GenConfig,
    range: std::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = Vec<RoundRecipe>> {
    vec(round(config), range)
}

fn thread(config: &GenConfig) -> impl Strategy<Value = ThreadRecipe> {
    (
        any::<u8>(),
        proptest::bool::weighted(0.3),
        rounds(config, 1..=config.max_thread_rounds.max(1)),
    )
        .prop_map(|(parent, archived, rounds)| ThreadRecipe {
            parent,
            archived,
            rounds,
        })
}

fn agent(faults: f64) -> impl Strategy<Value = AgentRecipe> {
    (
        0u8..4,
        proptest::bool::weighted(faults),
        proptest::bool::weighted(faults * 0.6),
        proptest::bool::weighted(faults * 0.6),
    )
        .prop_map(
            |(runtime, unsupported, deleted, machine_gone)| AgentRecipe {
                runtime,
                unsupported,
                deleted,
                machine_gone,
            },
        )
}

fn tombstones() -> impl Strategy<Value = Option<TombRecipe>> {
    proptest::option::weighted(
        0.3,
        (any::<u8>(), 1u8..=2, proptest::bool::weighted(0.4))
            .prop_map(|(at, len, cascade)| TombRecipe { at, len, cascade }),
    )
}

/// One conversation; `main` for the target's, else a smaller one.
fn family(config: &GenConfig, main: bool) -> impl Strategy<Value = FamilyRecipe> {
    let shrink = usize::from(!main);
    let prefix = config.max_prefix_rounds.saturating_sub(shrink);
    let suffix = if main { config.max_suffix_rounds } else { 1 };
    let threads = config.max_threads.saturating_sub(shrink);
    let cold = config.max_cold_rounds.saturating_sub(shrink);
    (
        (
            proptest::bool::weighted(0.4),
            proptest::bool::weighted(0.4),
            vec(
                agent(if main { 0.15 } else { 0.25 }),
                1..=config.max_agents.max(1),
            ),
            proptest::option::weighted(0.35, rounds(config, 1..=cold.max(1))),
        ),
        (
            rounds(config, 0..=prefix),
            round(config),
            rounds(config, 0..=suffix),
            rounds(config, 0..=2),
        ),
        (
            vec(thread(config), 0..=threads),
            proptest::option::weighted(0.45, thread(config)),
            tombstones(),
            proptest::array::uniform::<_, 8>(proptest::bool::weighted(0.55)),
            proptest::array::uniform::<_, 4>(any::<u8>()),
        ),
    )
        .prop_map(
            |(
                (dm, dm_human, agents, cold),
                (prefix, target, suffix, thread_prefix),
                (threads, tail, tombstones, rows, row_picks),
            )| FamilyRecipe {
                dm,
                dm_human,
                agents,
                cold: cold.unwrap_or_default(),
                prefix,
                target,
                suffix,
                thread_prefix,
                threads,
                tail,
                tombstones,
                rows,
                row_picks,
            },
        )
}

fn projection() -> impl Strategy<Value = ProjRecipe> {
    (
        proptest::array::uniform::<_, 10>(proptest::bool::weighted(0.22)),
        proptest::array::uniform::<_, 4>(any::<u8>()),
    )
        .prop_map(|(bits, picks)| ProjRecipe { bits, picks })
}

/// The strategy of whole recipes.
pub(crate) fn recipe(config: &GenConfig) -> impl Strategy<Value = Recipe> {
    (
        (
            aim(),
            extra(),
            any::<u8>(),
            1..=config.max_other_humans.max(1),
            any::<u8>(),
            0u8..3,
        ),
        (
            family(config, true),
            vec(family(config, false), 0..=config.max_background),
        ),
        (
            vec(any::<u8>(), 0..=64),
            proptest::bool::weighted(0.3),
            any::<u8>(),
            (proptest::bool::weighted(0.5), proptest::bool::weighted(0.5)),
            vec(projection(), 0..=48),
        ),
    )
        .prop_map(
            |(
                (aim, extra, variant, other_humans, initiator, target_kind),
                (target, background),
                (merge, early_elsewhere, early_pick, loose_attachments, projections),
            )| Recipe {
                aim,
                extra,
                variant,
                other_humans,
                initiator,
                target_kind,
                target,
                background,
                merge,
                early_elsewhere,
                early_pick,
                loose_attachments,
                projections,
            },
        )
}

//! [`build`]: a [`Recipe`] turned into a valid [`CaseModel`].
//!
//! The case is built as conversations ("families": a DM or channel main line with its reply
//! threads) made of rounds (a human message, the agents' replies, maybe a system-ish or
//! recalled message). The target's conversation is built around the target round so that a
//! rewind aimed at completing meets every precondition of spec sections 3 to 5:
//!
//! - the suffix holds only the initiator's human messages (plus agents, system-ish messages,
//!   recalled placeholders of the initiator's and earlier tombstones of anyone's);
//! - only the last visible main-line message may have a live reply thread (earlier suffix
//!   messages get archived ones only), and a cascaded thread holds the initiator and agents;
//! - the agents the suffix reaches ("suffix agents") run on a rewind-capable runtime, are not
//!   deleted, sit on a live machine, have a recovery point of their strategy on every message
//!   delivered to them, and take no turn outside the rewound scopes after the target: reply
//!   threads on earlier messages and other conversations use other agents.
//!
//! A guard is then planted on purpose, by changing the target, the initiator, the scope asked
//! for, or by adding one dedicated faulty agent or message to the suffix. Messages are ordered
//! at the end: threads interleave with their main line after their parent, conversations with
//! each other, by picks of the recipe; every message then gets its `seq` and `global_seq`.

use std::collections::BTreeSet;

use rewind_driver_protocol::Actor;

use super::model::CaseModel;
use super::recipe::{FamilyRecipe, ProjRecipe, Recipe, RoundRecipe, ThreadRecipe};
use super::shape::{Aim, Feature};
use crate::fixtures::{OutboxStatus, ScopeKind};

/// The rewind-capable runtimes of spec section 5.
pub(super) const RUNTIMES: [&str; 4] = ["codex", "claude", "opencode", "builtin"];

/// Runtimes no rewind supports: an unknown one, a recovery strategy's name, another unknown.
const UNSUPPORTED: [&str; 3] = ["gemini", "opencode_session_revert", "aider"];

/// Human ids and names; the first `1 + other_humans` are used.
const HUMANS: [(&str, &str); 5] = [
    ("alice", "Alice"),
    ("bob", "Bob"),
    ("carol", "Carol"),
    ("dave", "Dave"),
    ("erin", "Erin"),
];

/// A message's author while building.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Auth {
    Human(usize),
    Agent(usize),
    System,
    Service,
    App,
}

/// A message's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Life {
    Visible,
    Recalled,
    /// An earlier rewind's tombstone; the index is that rewind's notice message.
    Rewound(usize),
}

/// How a delivery's recovery point is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rp {
    /// Of the agent runtime's strategy, matching its session.
    Normal,
    /// Not written.
    Missing,
    /// Written with another runtime's strategy and ref.
    Mismatch,
}

/// A message delivered to an agent (a turn's input).
#[derive(Debug, Clone)]
pub(super) struct Delivery {
    pub agent: usize,
    pub rp: Rp,
    /// An outbox row the delivery must have (status forced), beside the recipe's.
    pub outbox: Option<OutboxStatus>,
}

/// An agent while building.
#[derive(Debug, Clone)]
pub(super) struct AgentB {
    pub id: String,
    pub name: String,
    pub runtime: String,
    pub deleted: bool,
    pub machine_gone: bool,
}

/// A scope while building.
#[derive(Debug, Clone)]
pub(super) struct ScopeB {
    pub id: String,
    pub stem: String,
    pub kind: ScopeKind,
    pub name: String,
    /// A reply thread's parent message.
    pub parent: Option<usize>,
    pub archived: bool,
    pub humans: BTreeSet<usize>,
    pub agents: BTreeSet<usize>,
    /// The owning conversation's scope-level row flags and picks.
    pub rows: ([bool; 8], [u8; 4]),
}

/// A message while building; `id`, `seq`, `global_seq` and `content` are set once ordered.
#[derive(Debug, Clone)]
pub(super) struct MsgB {
    pub scope: usize,
    pub author: Auth,
    pub cold: bool,
    pub life: Life,
    /// The rewind notice's client message id.
    pub notice: Option<String>,
    pub deliveries: Vec<Delivery>,
    /// The input an agent's message answers.
    pub reply_to: Option<usize>,
    pub proj: Option<ProjRecipe>,
    pub id: String,
    pub seq: i64,
    pub global_seq: i64,
    pub content: String,
}

impl MsgB {
    pub fn visible(&self) -> bool {
        !matches!(self.life, Life::Rewound(_))
    }
}

/// An ordered run of messages (of one or several scopes) that must keep its order, starting
/// only after `after` was placed.
#[derive(Debug, Clone, Default)]
struct Stream {
    msgs: Vec<usize>,
    after: Option<usize>,
}

/// Messages to place after merging: before `anchor` (anywhere earlier) or after it.
#[derive(Debug, Clone)]
struct Insert {
    anchor: usize,
    before: bool,
    msgs: Vec<usize>,
}

/// The builder's state; see the module documentation.
pub(super) struct Builder<'r> {
    pub seed: u64,
    pub index: u64,
    r: &'r Recipe,
    pub humans: Vec<(String, String)>,
    pub initiator: usize,
    pub agents: Vec<AgentB>,
    pub scopes: Vec<ScopeB>,
    pub msgs: Vec<MsgB>,
    /// Every message in chronological order, once merged.
    pub order: Vec<usize>,
    picks: usize,
    rewinds: usize,
    inserts: Vec<Insert>,
    side: Option<usize>,
    pub features: BTreeSet<Feature>,
    pub also: BTreeSet<Aim>,
    /// The target message, its scope and the scope asked for.
    pub target: usize,
    pub request_scope: usize,
    pub actor: Actor,
    /// The target conversation's main scope.
    pub target_main: usize,
}

/// Builds the case of `recipe` for case `index` of run `seed`.
pub(crate) fn build(seed: u64, index: u64, recipe: &Recipe) -> CaseModel {
    let other = recipe.other_humans.clamp(1, HUMANS.len() - 1);
    let humans: Vec<(String, String)> = HUMANS[..=other]
        .iter()
        .map(|(id, name)| ((*id).to_owned(), (*name).to_owned()))
        .collect();
    let initiator = usize::from(recipe.initiator) % humans.len();
    let mut b = Builder {
        seed,
        index,
        r: recipe,
        humans,
        initiator,
        agents: Vec::new(),
        scopes: Vec::new(),
        msgs: Vec::new(),
        order: Vec::new(),
        picks: 0,
        rewinds: 0,
        inserts: Vec::new(),
        side: None,
        features: BTreeSet::new(),
        also: BTreeSet::new(),
        target: 0,
        request_scope: 0,
        actor: Actor::System,
        target_main: 0,
    };
    let mut families = vec![b.target_family()];
    for (i, family) in recipe.background.iter().enumerate() {
        families.push(b.background_family(i + 1, family));
    }
    if families.len() > 1 {
        b.features.insert(Feature::OtherConversations);
    }
    b.order = b.merge(families);
    b.apply_inserts();
    b.choose_request_scope();
    b.number();
    super::finish::finish(&b)
}

mod order;
mod target;
mod text;

use text::{CHANNEL_NAMES, THREAD_NAMES};

impl Builder<'_> {
    /// The guard the recipe aims at.
    pub fn aim(&self) -> Aim {
        self.r.aim
    }

    /// Whether the case has a task-discussion attachment and an unclaimed upload.
    pub fn loose_attachments(&self) -> (bool, bool) {
        self.r.loose_attachments
    }

    /// The next merge pick, in `0..n` (0 once the recipe's picks run out).
    fn pick(&mut self, n: usize) -> usize {
        let value = self.r.merge.get(self.picks).copied().unwrap_or(0);
        self.picks += 1;
        usize::from(value) % n.max(1)
    }

    fn add_scope(
        &mut self,
        id: String,
        stem: String,
        kind: ScopeKind,
        name: &str,
        parent: Option<usize>,
        rows: ([bool; 8], [u8; 4]),
    ) -> usize {
        self.scopes.push(ScopeB {
            id,
            stem,
            kind,
            name: name.to_owned(),
            parent,
            archived: false,
            humans: BTreeSet::new(),
            agents: BTreeSet::new(),
            rows,
        });
        self.scopes.len() - 1
    }

    /// A reply thread of `parent`, numbered within its family `code`.
    fn add_thread(&mut self, code: &str, parent: usize, archived: bool) -> usize {
        let parent_scope = self.msgs[parent].scope;
        let number = self
            .scopes
            .iter()
            .filter(|s| s.kind == ScopeKind::ReplyThread && s.stem.starts_with(&format!("{code}r")))
            .count()
            + 1;
        let rows = self.scopes[parent_scope].rows;
        let name = THREAD_NAMES[(number + parent) % THREAD_NAMES.len()];
        let scope = self.add_scope(
            format!("th-{code}r{number}"),
            format!("{code}r{number}"),
            ScopeKind::ReplyThread,
            name,
            Some(parent),
            rows,
        );
        self.scopes[scope].archived = archived;
        if archived {
            self.features.insert(Feature::ArchivedThread);
        }
        scope
    }

    fn add_agent(
        &mut self,
        code: &str,
        runtime: String,
        deleted: bool,
        machine_gone: bool,
    ) -> usize {
        let number = self.agents.len() + 1;
        let name = match runtime.as_str() {
            "codex" => "Cody",
            "claude" => "Clio",
            "opencode" => "Ode",
            "builtin" => "Bix",
            _ => "Gem",
        };
        if !RUNTIMES.contains(&runtime.as_str()) {
            self.features.insert(Feature::UnsupportedAgent);
        }
        if deleted {
            self.features.insert(Feature::DeletedAgent);
        }
        if machine_gone {
            self.features.insert(Feature::DeletedMachine);
        }
        self.agents.push(AgentB {
            id: format!("ag-{code}-{number}"),
            name: format!("{name} {number}"),
            runtime,
            deleted,
            machine_gone,
        });
        number - 1
    }

    fn push(&mut self, scope: usize, author: Auth, cold: bool) -> usize {
        match author {
            Auth::Human(h) => {
                self.scopes[scope].humans.insert(h);
            }
            Auth::Agent(a) => {
                self.scopes[scope].agents.insert(a);
            }
            Auth::System | Auth::Service | Auth::App => {
                self.features.insert(Feature::SystemMessages);
            }
        }
        if cold {
            self.features.insert(Feature::ColdHistory);
        }
        let proj = self.r.projections.get(self.msgs.len()).cloned();
        self.msgs.push(MsgB {
            scope,
            author,
            cold,
            life: Life::Visible,
            notice: None,
            deliveries: Vec::new(),
            reply_to: None,
            proj,
            id: String::new(),
            seq: 0,
            global_seq: 0,
            content: String::new(),
        });
        self.msgs.len() - 1
    }

    /// Delivers `input` to `agent`, which answers it in the same scope; returns the answer.
    fn reply(&mut self, input: usize, agent: usize, rp: Rp) -> usize {
        let scope = self.msgs[input].scope;
        let cold = self.msgs[input].cold;
        self.msgs[input].deliveries.push(Delivery {
            agent,
            rp,
            outbox: None,
        });
        let answer = self.push(scope, Auth::Agent(agent), cold);
        self.msgs[answer].reply_to = Some(input);
        answer
    }

    /// One round in `scope`: `author`'s message, replies of agents picked from `pool`, the
    /// recipe's extra message. Returns the human message.
    fn round(
        &mut self,
        scope: usize,
        recipe: &RoundRecipe,
        author: usize,
        pool: &[usize],
        cold: bool,
        out: &mut Vec<usize>,
    ) -> usize {
        let human = self.push(scope, Auth::Human(author), cold);
        out.push(human);
        let mut repliers: Vec<usize> = Vec::new();
        if !pool.is_empty() {
            for pick in &recipe.replies {
                let agent = pool[usize::from(*pick) % pool.len()];
                if !repliers.contains(&agent) {
                    repliers.push(agent);
                }
            }
        }
        for agent in repliers {
            let answer = self.reply(human, agent, Rp::Normal);
            out.push(answer);
        }
        let extra = match recipe.extra {
            6 => Some(Auth::System),
            7 => Some(Auth::Service),
            8 => Some(Auth::App),
            9 => Some(Auth::Human(author)),
            _ => None,
        };
        if let Some(extra) = extra {
            let message = self.push(scope, extra, cold);
            if recipe.extra == 9 {
                self.msgs[message].life = Life::Recalled;
                self.features.insert(Feature::Recalled);
            }
            out.push(message);
        }
        human
    }

    /// The rounds of `recipes`, authors picked from `authors`.
    fn rounds(
        &mut self,
        scope: usize,
        recipes: &[RoundRecipe],
        authors: &[usize],
        pool: &[usize],
        cold: bool,
        out: &mut Vec<usize>,
    ) {
        for recipe in recipes {
            let author = authors[usize::from(recipe.author) % authors.len()];
            self.round(scope, recipe, author, pool, cold, out);
        }
    }

    /// Rounds whose messages become an earlier rewind's tombstones (one author, the earlier
    /// initiator), the rewind's notice after them, and, when it cascaded, an archived thread
    /// on the last tombstoned message whose messages are tombstones too.
    #[allow(clippy::too_many_arguments)]
    fn tombstoned_rounds(
        &mut self,
        code: &str,
        scope: usize,
        recipes: &[RoundRecipe],
        author: usize,
        pool: &[usize],
        cascade: bool,
        out: &mut Vec<usize>,
    ) -> usize {
        let start = out.len();
        for recipe in recipes {
            self.round(scope, recipe, author, pool, false, out);
        }
        let Some(&last) = out.last() else {
            return 0;
        };
        let first = out[start];
        if cascade && out.len() > start {
            let thread = self.add_thread(code, last, true);
            let human = self.push(thread, Auth::Human(author), false);
            out.push(human);
            if let Some(&agent) = pool.first() {
                let answer = self.reply(human, agent, Rp::Normal);
                out.push(answer);
            }
        }
        self.rewinds += 1;
        let notice = self.push(scope, Auth::System, false);
        self.msgs[notice].notice = Some(format!(
            "rewind-notice:op-g{:x}-{}-{}",
            self.seed, self.index, self.rewinds
        ));
        for &message in &out[start..] {
            self.msgs[message].life = Life::Rewound(notice);
        }
        out.push(notice);
        self.features.insert(Feature::EarlierTombstones);
        first
    }

    /// Agents of a conversation from its recipe; `healthy` forces a rewind-capable runtime,
    /// no deletion and a live machine.
    fn agents_of(
        &mut self,
        code: &str,
        family: &FamilyRecipe,
        healthy: &dyn Fn(usize) -> bool,
    ) -> Vec<usize> {
        let mut made = Vec::new();
        for (i, recipe) in family.agents.iter().enumerate() {
            let healthy = healthy(i);
            let runtime = if recipe.unsupported && !healthy {
                UNSUPPORTED[usize::from(recipe.runtime) % UNSUPPORTED.len()]
            } else {
                RUNTIMES[usize::from(recipe.runtime) % RUNTIMES.len()]
            };
            made.push(self.add_agent(
                code,
                runtime.to_owned(),
                recipe.deleted && !healthy,
                recipe.machine_gone && !healthy,
            ));
        }
        made
    }

    /// The humans of a conversation: `first`, then others picked by `pick`.
    fn humans_of(&self, first: usize, count: usize, pick: u8) -> Vec<usize> {
        let n = self.humans.len();
        let mut humans = vec![first];
        let mut next = (first + 1 + usize::from(pick)) % n;
        while humans.len() < count.min(n) {
            if !humans.contains(&next) {
                humans.push(next);
            }
            next = (next + 1) % n;
        }
        humans
    }

    /// A thread on a visible hot message among `candidates`, live unless `archived` or the
    /// message already has a live thread.
    fn thread_on(
        &mut self,
        code: &str,
        candidates: &[usize],
        recipe: &ThreadRecipe,
        authors: &[usize],
        pool: &[usize],
        live_parents: &mut BTreeSet<usize>,
    ) -> Option<Stream> {
        if candidates.is_empty() {
            return None;
        }
        let parent = candidates[usize::from(recipe.parent) % candidates.len()];
        let archived = recipe.archived || live_parents.contains(&parent);
        if !archived {
            live_parents.insert(parent);
        }
        let scope = self.add_thread(code, parent, archived);
        let mut msgs = Vec::new();
        self.rounds(scope, &recipe.rounds, authors, pool, false, &mut msgs);
        Some(Stream {
            msgs,
            after: Some(parent),
        })
    }

    /// Visible hot messages of `scope` among `msgs`.
    fn visible_hot(&self, msgs: &[usize], scope: usize) -> Vec<usize> {
        msgs.iter()
            .copied()
            .filter(|&m| {
                let message = &self.msgs[m];
                message.scope == scope && message.visible() && !message.cold
            })
            .collect()
    }

    /// Another conversation: anything goes, with its own agents.
    fn background_family(&mut self, number: usize, family: &FamilyRecipe) -> Vec<usize> {
        let code = format!("b{number}");
        let first = usize::from(family.row_picks[0]) % self.humans.len();
        let (kind, humans, agents) = if family.dm && family.dm_human {
            (
                ScopeKind::Dm,
                self.humans_of(first, 2, family.row_picks[1]),
                Vec::new(),
            )
        } else if family.dm {
            let agents = self.agents_of(&code, family, &|_| false);
            (
                ScopeKind::Dm,
                vec![first],
                agents.into_iter().take(1).collect(),
            )
        } else {
            let count = 2 + usize::from(family.row_picks[2]) % 2;
            let humans = self.humans_of(first, count, family.row_picks[1]);
            (
                ScopeKind::Channel,
                humans,
                self.agents_of(&code, family, &|_| false),
            )
        };
        let name = CHANNEL_NAMES[(number + usize::from(family.row_picks[3])) % CHANNEL_NAMES.len()];
        let prefix = if kind == ScopeKind::Dm { "dm" } else { "ch" };
        let main = self.add_scope(
            format!("{prefix}-{code}"),
            code.clone(),
            kind,
            name,
            None,
            (family.rows, family.row_picks),
        );
        for &h in &humans {
            self.scopes[main].humans.insert(h);
        }
        for &a in &agents {
            self.scopes[main].agents.insert(a);
        }
        let mut line = Vec::new();
        self.rounds(main, &family.cold, &humans, &agents, true, &mut line);
        let mut rounds: Vec<RoundRecipe> = family.prefix.clone();
        rounds.push(family.target.clone());
        rounds.extend(family.suffix.iter().cloned());
        match &family.tombstones {
            Some(tomb) => {
                let at = usize::from(tomb.at) % rounds.len();
                let end = (at + usize::from(tomb.len)).min(rounds.len());
                self.rounds(main, &rounds[..at], &humans, &agents, false, &mut line);
                let author = humans[usize::from(rounds[at].author) % humans.len()];
                self.tombstoned_rounds(
                    &code,
                    main,
                    &rounds[at..end],
                    author,
                    &agents,
                    tomb.cascade,
                    &mut line,
                );
                self.rounds(main, &rounds[end..], &humans, &agents, false, &mut line);
            }
            None => self.rounds(main, &rounds, &humans, &agents, false, &mut line),
        }
        let mut streams = vec![Stream {
            msgs: line.clone(),
            after: None,
        }];
        let mut live = BTreeSet::new();
        let candidates = self.visible_hot(&line, main);
        for thread in &family.threads {
            if let Some(stream) =
                self.thread_on(&code, &candidates, thread, &humans, &agents, &mut live)
            {
                streams.push(stream);
            }
        }
        if let (Some(tail), Some(&last)) = (&family.tail, candidates.last()) {
            if let Some(stream) = self.thread_on(&code, &[last], tail, &humans, &agents, &mut live)
            {
                streams.push(stream);
            }
        }
        self.merge_family(main, streams)
    }

    /// The scope a side turn happens in (created on first use).
    fn side_scope(&mut self) -> usize {
        if let Some(side) = self.side {
            return side;
        }
        let rows = self.r.target.rows;
        let picks = self.r.target.row_picks;
        let side = self.add_scope(
            "ch-side".to_owned(),
            "side".to_owned(),
            ScopeKind::Channel,
            "side work",
            None,
            (rows, picks),
        );
        self.side = Some(side);
        side
    }

    /// A turn of `agent` in `scope`: a human message delivered to it and (with `answer`) its
    /// reply; `outbox` forces an outbox row on the delivery.
    fn side_turn(
        &mut self,
        scope: usize,
        human: usize,
        agent: usize,
        answer: bool,
        outbox: Option<OutboxStatus>,
    ) -> Vec<usize> {
        let input = self.push(scope, Auth::Human(human), false);
        let mut msgs = vec![input];
        if answer {
            msgs.push(self.reply(input, agent, Rp::Normal));
        } else {
            self.msgs[input].deliveries.push(Delivery {
                agent,
                rp: Rp::Normal,
                outbox: None,
            });
            self.scopes[scope].agents.insert(agent);
        }
        if let Some(status) = outbox {
            if let Some(delivery) = self.msgs[input].deliveries.last_mut() {
                delivery.outbox = Some(status);
            }
        }
        msgs
    }

    /// With the guard aimed at being [`Aim::WrongScope`], asks for another scope than the
    /// target's (its parent scope first, for a thread target); else the target's.
    fn choose_request_scope(&mut self) {
        let target_scope = self.msgs[self.target].scope;
        self.request_scope = target_scope;
        if self.r.aim != Aim::WrongScope {
            return;
        }
        let mut candidates: Vec<usize> = Vec::new();
        if let Some(parent) = self.scopes[target_scope].parent {
            candidates.push(self.msgs[parent].scope);
        }
        let first = candidates.first().copied();
        candidates
            .extend((0..self.scopes.len()).filter(|&s| s != target_scope && Some(s) != first));
        if candidates.is_empty() {
            // Only the target's scope exists: add another conversation of the initiator's.
            let rows = self.r.target.rows;
            let picks = self.r.target.row_picks;
            let other = self.add_scope(
                "ch-other".to_owned(),
                "other".to_owned(),
                ScopeKind::Channel,
                "elsewhere",
                None,
                (rows, picks),
            );
            let message = self.push(other, Auth::Human(self.initiator), false);
            self.order.push(message);
            candidates.push(other);
        }
        let variant = usize::from(self.r.variant);
        self.request_scope = if variant % 2 == 0 {
            candidates[0]
        } else {
            candidates[(variant / 2) % candidates.len()]
        };
    }
}

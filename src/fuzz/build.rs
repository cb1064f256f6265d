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

    /// Merges a conversation's streams: each thread after its parent, interleaved by picks.
    fn merge_family(&mut self, main: usize, streams: Vec<Stream>) -> Vec<usize> {
        let mut placed: BTreeSet<usize> = BTreeSet::new();
        let mut next = vec![0usize; streams.len()];
        let mut order = Vec::new();
        loop {
            let ready: Vec<usize> = (0..streams.len())
                .filter(|&s| {
                    next[s] < streams[s].msgs.len()
                        && streams[s].after.is_none_or(|after| placed.contains(&after))
                })
                .collect();
            if ready.is_empty() {
                break;
            }
            let chosen = ready[self.pick(ready.len())];
            let message = streams[chosen].msgs[next[chosen]];
            next[chosen] += 1;
            placed.insert(message);
            order.push(message);
        }
        // A thread message placed while its parent's main line still went on interleaves.
        for (s, stream) in streams.iter().enumerate().skip(1) {
            let Some(&first) = stream.msgs.first() else {
                continue;
            };
            let position = |m: usize| order.iter().position(|&o| o == m);
            let main_after = streams[0].msgs.last().and_then(|&last| position(last));
            if let (Some(first), Some(last_main)) = (position(first), main_after) {
                if first < last_main && self.msgs[stream.msgs[0]].scope != main {
                    self.features.insert(Feature::InterleavedThread);
                }
            }
            let _ = s;
        }
        order
    }

    /// Merges the conversations' orders, interleaved by picks.
    fn merge(&mut self, families: Vec<Vec<usize>>) -> Vec<usize> {
        let streams = families
            .into_iter()
            .map(|msgs| Stream { msgs, after: None })
            .collect::<Vec<_>>();
        let mut next = vec![0usize; streams.len()];
        let mut order = Vec::new();
        loop {
            let ready: Vec<usize> = (0..streams.len())
                .filter(|&s| next[s] < streams[s].msgs.len())
                .collect();
            if ready.is_empty() {
                break;
            }
            let chosen = ready[self.pick(ready.len())];
            order.push(streams[chosen].msgs[next[chosen]]);
            next[chosen] += 1;
        }
        order
    }

    /// Places the messages planted before or after an anchor.
    fn apply_inserts(&mut self) {
        let inserts = std::mem::take(&mut self.inserts);
        for insert in inserts {
            let Some(anchor) = self.order.iter().position(|&m| m == insert.anchor) else {
                continue;
            };
            let at = if insert.before {
                self.pick(anchor + 1)
            } else {
                anchor + 1 + self.pick(self.order.len() - anchor)
            };
            for (offset, &message) in insert.msgs.iter().enumerate() {
                self.order.insert(at + offset, message);
            }
        }
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

    /// Gives every message its `seq`, `global_seq`, id and content, in merged order.
    fn number(&mut self) {
        let mut seqs = vec![0i64; self.scopes.len()];
        for (position, &m) in self.order.iter().enumerate() {
            let scope = self.msgs[m].scope;
            seqs[scope] += 1;
            let global_seq = i64::try_from(position + 1).unwrap_or(i64::MAX);
            let message = &mut self.msgs[m];
            message.seq = seqs[scope];
            message.global_seq = global_seq;
            message.id = format!("{}-{}", self.scopes[scope].stem, seqs[scope]);
        }
        for &m in &self.order {
            let content = match self.msgs[m].life {
                Life::Rewound(_) => String::new(),
                _ => format!(
                    "{} CANARY-g{:x}-{}-{}",
                    self.phrase(m),
                    self.seed,
                    self.index,
                    self.msgs[m].global_seq
                ),
            };
            self.msgs[m].content = content;
        }
    }

    /// A line of text for message `m`.
    fn phrase(&self, m: usize) -> String {
        let message = &self.msgs[m];
        let pick = super::ids::mix(self.seed, self.index, m as u64) as usize;
        match message.author {
            Auth::Human(_) if message.notice.is_none() => {
                let text = HUMAN_LINES[pick % HUMAN_LINES.len()];
                match message.deliveries.first() {
                    Some(delivery) => {
                        let name = &self.agents[delivery.agent].name;
                        format!("{}, {text}", name.split(' ').next().unwrap_or(name))
                    }
                    None => capitalise(text),
                }
            }
            Auth::Agent(_) => AGENT_LINES[pick % AGENT_LINES.len()].to_owned(),
            Auth::System if message.notice.is_some() => {
                let who = self.tombstone_author(m);
                format!("{who} rewound the conversation")
            }
            Auth::System => SYSTEM_LINES[pick % SYSTEM_LINES.len()].to_owned(),
            Auth::Service => SERVICE_LINES[pick % SERVICE_LINES.len()].to_owned(),
            Auth::App => APP_LINES[pick % APP_LINES.len()].to_owned(),
            Auth::Human(_) => String::new(),
        }
    }

    /// The name of whoever made the rewind whose notice is `notice`.
    fn tombstone_author(&self, notice: usize) -> String {
        self.msgs
            .iter()
            .find_map(|message| match (message.life, message.author) {
                (Life::Rewound(n), Auth::Human(h)) if n == notice => Some(self.humans[h].1.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "Someone".to_owned())
    }
}

/// How the target conversation is laid out and which guards are planted.
struct Plan {
    aim: Aim,
    extra: Option<Aim>,
    variant: u8,
    thread_target: bool,
}

impl Plan {
    fn has(&self, aim: Aim) -> bool {
        self.aim == aim || self.extra == Some(aim)
    }

    /// The variant bits of one planted guard (the extra one reads other bits).
    fn variant_of(&self, aim: Aim) -> usize {
        let bits = if self.aim == aim {
            self.variant
        } else {
            self.variant.rotate_left(4)
        };
        usize::from(bits)
    }
}

/// A faulty agent planted in the suffix for one guard.
struct Faulty {
    aim: Aim,
    agent: usize,
    /// Answers in the cascaded thread.
    in_cascade: bool,
    /// Answers, after the target, a message from before it (a missing recovery point).
    late: bool,
}

/// A round of the initiator's with no reply and no extra message.
fn quiet() -> RoundRecipe {
    RoundRecipe {
        author: 0,
        replies: Vec::new(),
        extra: 0,
    }
}

impl Builder<'_> {
    /// The target's conversation, built around the target round.
    fn target_family(&mut self) -> Vec<usize> {
        let r = self.r;
        let family = &r.target;
        let mut plan = Plan {
            aim: r.aim,
            // A case meant to complete gets no further guard.
            extra: r
                .extra
                .filter(|extra| *extra != r.aim && r.aim != Aim::Complete),
            variant: r.variant,
            thread_target: false,
        };
        plan.thread_target = r.target_kind == 2
            && !plan.aim.needs_main_line()
            && !plan.extra.is_some_and(Aim::needs_main_line);
        let thread_target = plan.thread_target;
        let cold_target = plan.aim == Aim::ColdTarget;
        let dm = match r.target_kind {
            0 => true,
            1 => false,
            _ => family.dm,
        };
        let not_own_by_agent =
            plan.aim == Aim::NotOwnTarget && plan.variant_of(Aim::NotOwnTarget) % 2 == 1;
        let needs_agent = plan.has(Aim::AgentInitiator)
            || not_own_by_agent
            || plan.aim.needs_agent()
            || plan.extra.is_some_and(Aim::needs_agent);
        let needs_other_human =
            plan.has(Aim::OtherHumanLater) || (plan.aim == Aim::NotOwnTarget && !not_own_by_agent);
        let kind = match (dm, family.dm_human) {
            (true, true) if !needs_agent => ScopeKind::Dm,
            (true, false) if !needs_other_human => ScopeKind::Dm,
            _ => ScopeKind::Channel,
        };
        let dm_human = kind == ScopeKind::Dm && family.dm_human;
        let code = "t";
        let init = self.initiator;
        let humans = match kind {
            ScopeKind::Dm if dm_human => self.humans_of(init, 2, family.row_picks[1]),
            ScopeKind::Dm => vec![init],
            _ => {
                let count = 2 + usize::from(family.row_picks[2]) % self.humans.len();
                self.humans_of(init, count, family.row_picks[1])
            }
        };
        let others: Vec<usize> = humans.iter().copied().filter(|&h| h != init).collect();
        // Suffix agents first (healthy), then agents of earlier messages only (anything).
        let wanted = match kind {
            ScopeKind::Dm if dm_human => 0,
            ScopeKind::Dm => 1,
            _ => family.agents.len(),
        };
        let suffix_count = wanted.div_ceil(2);
        let mut recipe = family.clone();
        recipe.agents.truncate(wanted);
        let agents = self.agents_of(code, &recipe, &|i| i < suffix_count);
        let suffix_agents: Vec<usize> = agents[..suffix_count].to_vec();
        let earlier_agents: Vec<usize> = agents[suffix_count..].to_vec();

        let prefix = if kind == ScopeKind::Dm { "dm" } else { "ch" };
        let name = CHANNEL_NAMES[usize::from(family.row_picks[3]) % CHANNEL_NAMES.len()];
        let main = self.add_scope(
            format!("{prefix}-{code}"),
            code.to_owned(),
            kind,
            name,
            None,
            (family.rows, family.row_picks),
        );
        self.target_main = main;
        for &h in &humans {
            self.scopes[main].humans.insert(h);
        }
        for &a in &agents {
            self.scopes[main].agents.insert(a);
        }

        // One faulty agent per agent guard planted.
        let mut faulty: Vec<Faulty> = Vec::new();
        for aim in [plan.aim].into_iter().chain(plan.extra) {
            if !aim.needs_agent() {
                continue;
            }
            let v = plan.variant_of(aim);
            let runtime = match aim {
                Aim::UnsupportedRuntime => UNSUPPORTED[v % UNSUPPORTED.len()].to_owned(),
                _ => RUNTIMES[(v / 3) % RUNTIMES.len()].to_owned(),
            };
            let (deleted, gone) = match aim {
                Aim::AgentUnavailable => (v.is_multiple_of(2), !v.is_multiple_of(2)),
                _ => (false, false),
            };
            let agent = self.add_agent("x", runtime, deleted, gone);
            let late = aim == Aim::MissingRecoveryPoint && v % 3 == 2 && !cold_target;
            faulty.push(Faulty {
                aim,
                agent,
                in_cascade: !late && !thread_target && (v >> 5) & 1 == 1,
                late,
            });
        }
        let late_agent = faulty.iter().find(|f| f.late).map(|f| f.agent);

        let mut line: Vec<usize> = Vec::new();
        let mut streams: Vec<Stream> = Vec::new();
        let mut live_parents = BTreeSet::new();

        // Cold history; a cold target is the initiator's first cold message.
        let mut cold_rounds = family.cold.clone();
        if cold_target && cold_rounds.is_empty() {
            cold_rounds.push(family.target.clone());
        }
        let mut target_msg = None;
        for (i, recipe) in cold_rounds.iter().enumerate() {
            let author = if cold_target && i == 0 {
                init
            } else {
                humans[usize::from(recipe.author) % humans.len()]
            };
            let human = self.round(main, recipe, author, &agents, true, &mut line);
            if cold_target && i == 0 {
                target_msg = Some(human);
            }
        }

        // Rounds before the target, an earlier rewind's tombstones among them. A thread target
        // forks from one of them; the main line goes on meanwhile, with agents the suffix does
        // not reach.
        let mut prefix_rounds = family.prefix.clone();
        if thread_target && prefix_rounds.is_empty() {
            prefix_rounds.push(family.target.clone());
        }
        let fork_round = if thread_target {
            usize::from(family.row_picks[1]) % prefix_rounds.len()
        } else {
            prefix_rounds.len()
        };
        let tomb = family
            .tombstones
            .as_ref()
            .filter(|_| !prefix_rounds.is_empty());
        let tomb_at = tomb.map_or(usize::MAX, |t| usize::from(t.at) % prefix_rounds.len());
        let mut fork_parent = None;
        let mut last_human = None;
        let mut i = 0;
        while i < prefix_rounds.len() {
            // The fork round's replies already follow the fork, so they may come after the
            // target: from it on, only agents the suffix does not reach answer.
            let pool = if i >= fork_round {
                earlier_agents.clone()
            } else {
                agents.clone()
            };
            if let (Some(t), true) = (tomb, i == tomb_at) {
                let end = (i + usize::from(t.len)).min(prefix_rounds.len());
                let author = humans[usize::from(prefix_rounds[i].author) % humans.len()];
                self.tombstoned_rounds(
                    code,
                    main,
                    &prefix_rounds[i..end],
                    author,
                    &pool,
                    t.cascade,
                    &mut line,
                );
                if (i..end).contains(&fork_round) {
                    // The fork round was tombstoned: fork from the rewind's notice.
                    fork_parent = line.last().copied();
                }
                i = end;
                continue;
            }
            let author = humans[usize::from(prefix_rounds[i].author) % humans.len()];
            let human = self.round(main, &prefix_rounds[i], author, &pool, false, &mut line);
            if i == fork_round {
                fork_parent = Some(human);
            }
            if i <= fork_round {
                last_human = Some(human);
            }
            i += 1;
        }

        // The target's line: the main line, or a reply thread of it.
        let mut tline: Vec<usize> = Vec::new();
        let target_scope = if thread_target {
            let parent = fork_parent.or(line.last().copied()).unwrap_or_default();
            live_parents.insert(parent);
            let thread = self.add_thread(code, parent, false);
            self.scopes[thread].humans.insert(init);
            last_human = None;
            for recipe in &family.thread_prefix {
                let author = humans[usize::from(recipe.author) % humans.len()];
                last_human = Some(self.round(thread, recipe, author, &agents, false, &mut tline));
            }
            streams.push(Stream {
                msgs: Vec::new(),
                after: Some(parent),
            });
            thread
        } else {
            main
        };
        if late_agent.is_some() && last_human.is_none() {
            last_human = Some(self.round(target_scope, &quiet(), init, &[], false, &mut tline));
        }

        // The target round.
        let mut first_touch: Vec<(usize, usize)> = Vec::new();
        if cold_target {
            // The target is cold; everything after it is the suffix.
        } else if plan.aim == Aim::AlreadyRewound {
            let first = self.tombstoned_rounds(
                code,
                target_scope,
                std::slice::from_ref(&family.target),
                init,
                &suffix_agents,
                false,
                &mut tline,
            );
            target_msg = Some(first);
        } else {
            let author = if plan.aim == Aim::NotOwnTarget && !not_own_by_agent {
                others
                    .get(usize::from(family.target.author) % others.len().max(1))
                    .copied()
                    .unwrap_or(init)
            } else {
                init
            };
            let human = self.push(target_scope, Auth::Human(author), false);
            tline.push(human);
            target_msg = Some(human);
            if let (Some(agent), Some(input)) = (late_agent, last_human) {
                self.msgs[input].deliveries.push(Delivery {
                    agent,
                    rp: Rp::Normal,
                    outbox: None,
                });
                let answer = self.push(target_scope, Auth::Agent(agent), false);
                self.msgs[answer].reply_to = Some(input);
                tline.push(answer);
                self.also.insert(Aim::MissingRecoveryPoint);
            }
            let mut repliers: Vec<usize> = Vec::new();
            if !suffix_agents.is_empty() {
                for pick in &family.target.replies {
                    let agent = suffix_agents[usize::from(*pick) % suffix_agents.len()];
                    if !repliers.contains(&agent) {
                        repliers.push(agent);
                    }
                }
                if not_own_by_agent && repliers.is_empty() {
                    repliers.push(suffix_agents[0]);
                }
            }
            for (n, agent) in repliers.into_iter().enumerate() {
                let answer = self.reply(human, agent, Rp::Normal);
                tline.push(answer);
                first_touch.push((agent, human));
                if not_own_by_agent && n == 0 {
                    target_msg = Some(answer);
                }
            }
            let extra = if plan.aim == Aim::SystemTarget {
                Some(
                    [Auth::System, Auth::Service, Auth::App]
                        [plan.variant_of(Aim::SystemTarget) % 3],
                )
            } else {
                match family.target.extra {
                    6 => Some(Auth::System),
                    7 => Some(Auth::Service),
                    8 => Some(Auth::App),
                    9 => Some(Auth::Human(author)),
                    _ => None,
                }
            };
            if let Some(extra) = extra {
                let message = self.push(target_scope, extra, false);
                if matches!(extra, Auth::Human(_)) {
                    self.msgs[message].life = Life::Recalled;
                    self.features.insert(Feature::Recalled);
                }
                tline.push(message);
                if plan.aim == Aim::SystemTarget {
                    target_msg = Some(message);
                }
            }
        }
        let target_msg = target_msg.unwrap_or_default();
        self.target = target_msg;

        // The suffix rounds: the initiator's, answered by the suffix agents; another human's
        // round, or recalled message, when that guard is planted.
        let other_later = plan
            .has(Aim::OtherHumanLater)
            .then(|| plan.variant_of(Aim::OtherHumanLater) % 3)
            .filter(|_| !others.is_empty());
        let cascade_variant = other_later == Some(1) && !thread_target;
        let mut suffix_rounds = family.suffix.clone();
        let mut other_round = None;
        if other_later == Some(0) || (other_later == Some(1) && thread_target) {
            other_round = Some(suffix_rounds.len() / 2);
            suffix_rounds.insert(suffix_rounds.len() / 2, family.target.clone());
        }
        for (i, recipe) in suffix_rounds.iter().enumerate() {
            let author = if other_round == Some(i) {
                self.also.insert(Aim::OtherHumanLater);
                others[usize::from(recipe.author) % others.len()]
            } else {
                init
            };
            let human = self.round(
                target_scope,
                recipe,
                author,
                &suffix_agents,
                false,
                &mut tline,
            );
            for delivery in &self.msgs[human].deliveries {
                if !first_touch.iter().any(|(a, _)| *a == delivery.agent) {
                    first_touch.push((delivery.agent, human));
                }
            }
        }
        if other_later == Some(2) {
            let other = others[plan.variant_of(Aim::OtherHumanLater) / 3 % others.len()];
            let message = self.push(target_scope, Auth::Human(other), false);
            self.msgs[message].life = Life::Recalled;
            self.features.insert(Feature::Recalled);
            tline.push(message);
            self.also.insert(Aim::OtherHumanLater);
        }

        // A later reply thread: a live thread on a suffix message that is not the last.
        let mut fork_streams = Vec::new();
        if plan.has(Aim::LaterReplyThread) && !thread_target {
            let mut visible = self.visible_hot(&tline, target_scope);
            if visible.len() < 2 {
                self.round(target_scope, &quiet(), init, &[], false, &mut tline);
                visible = self.visible_hot(&tline, target_scope);
            }
            if visible.len() >= 2 {
                let choices = &visible[..visible.len() - 1];
                let parent = choices[plan.variant_of(Aim::LaterReplyThread) % choices.len()];
                live_parents.insert(parent);
                let thread = self.add_thread(code, parent, false);
                let mut msgs = Vec::new();
                self.round(thread, &quiet(), init, &[], false, &mut msgs);
                fork_streams.push(Stream {
                    msgs,
                    after: Some(parent),
                });
                self.also.insert(Aim::LaterReplyThread);
            }
        }
        if !thread_target {
            line.append(&mut tline);
        }

        // Faulty agents answer in the target's line (those meant for the cascade later).
        for f in faulty.iter().filter(|f| !f.late && !f.in_cascade) {
            let list = if thread_target { &mut tline } else { &mut line };
            let input = self.place_reply(list, target_msg, target_scope, f.agent, init);
            first_touch.push((f.agent, input));
            self.also.insert(f.aim);
        }

        // Threads on earlier messages (and archived ones on suffix messages), with the agents
        // the suffix does not reach.
        let earlier: Vec<usize> = if thread_target {
            self.visible_hot(&line, main)
        } else {
            let before: Vec<usize> = line
                .iter()
                .copied()
                .take_while(|&m| m != target_msg)
                .collect();
            self.visible_hot(&before, main)
        };
        let suffix_main: Vec<usize> = if thread_target {
            Vec::new()
        } else {
            let from = self.order_index_in(&line, target_msg);
            let after = line[from.min(line.len())..].to_vec();
            self.visible_hot(&after, main)
        };
        let mut middle = Vec::new();
        for thread in &family.threads {
            let on_suffix = usize::from(thread.parent) % 4 == 3 && suffix_main.len() > 1;
            let stream = if on_suffix {
                let mut archived = thread.clone();
                archived.archived = true;
                let choices = suffix_main[..suffix_main.len() - 1].to_vec();
                self.thread_on(
                    code,
                    &choices,
                    &archived,
                    &humans,
                    &earlier_agents,
                    &mut live_parents,
                )
            } else {
                self.thread_on(
                    code,
                    &earlier,
                    thread,
                    &humans,
                    &earlier_agents,
                    &mut live_parents,
                )
            };
            if let Some(stream) = stream {
                let scope = self.msgs[stream.msgs[0]].scope;
                if !on_suffix {
                    if !self.scopes[scope].archived {
                        self.features.insert(Feature::MiddleThread);
                    }
                    middle.push(scope);
                }
                streams.push(stream);
            }
        }

        // The tail thread: on a main-line target, the one that cascades (the initiator's, with
        // the suffix agents) unless archived; on a thread target, one on the main line's last
        // message.
        let forced = cascade_variant || faulty.iter().any(|f| f.in_cascade);
        let mut cascaded = false;
        if !thread_target && (family.tail.is_some() || forced) {
            let tail_parent = suffix_main.last().copied();
            if let Some(parent) = tail_parent.filter(|p| !live_parents.contains(p)) {
                let recipe = family.tail.clone().unwrap_or(ThreadRecipe {
                    parent: 0,
                    archived: false,
                    rounds: vec![family.target.clone()],
                });
                let archived = recipe.archived && !forced;
                live_parents.insert(parent);
                let thread = self.add_thread(code, parent, archived);
                let mut msgs = Vec::new();
                if archived {
                    self.rounds(
                        thread,
                        &recipe.rounds,
                        &humans,
                        &earlier_agents,
                        false,
                        &mut msgs,
                    );
                } else {
                    cascaded = true;
                    for round in &recipe.rounds {
                        let human =
                            self.round(thread, round, init, &suffix_agents, false, &mut msgs);
                        for delivery in &self.msgs[human].deliveries {
                            if !first_touch.iter().any(|(a, _)| *a == delivery.agent) {
                                first_touch.push((delivery.agent, human));
                            }
                        }
                    }
                    for f in faulty.iter().filter(|f| f.in_cascade) {
                        let input = msgs[0];
                        let answer = self.reply(input, f.agent, Rp::Normal);
                        msgs.insert(1, answer);
                        first_touch.push((f.agent, input));
                        self.also.insert(f.aim);
                    }
                    if cascade_variant {
                        let other =
                            others[plan.variant_of(Aim::OtherHumanLater) / 3 % others.len()];
                        self.round(
                            thread,
                            &recipe.rounds[0],
                            other,
                            &suffix_agents,
                            false,
                            &mut msgs,
                        );
                        self.also.insert(Aim::OtherHumanLater);
                    }
                }
                streams.push(Stream {
                    msgs,
                    after: Some(parent),
                });
            }
        } else if let (Some(tail), true) = (&family.tail, thread_target) {
            if let Some(&last) = self.visible_hot(&line, main).last() {
                if let Some(stream) = self.thread_on(
                    code,
                    &[last],
                    tail,
                    &humans,
                    &earlier_agents,
                    &mut live_parents,
                ) {
                    streams.push(stream);
                }
            }
        }
        if !cascaded {
            // No cascade could be made: the agents meant for it answer in the target's line.
            for f in faulty.iter().filter(|f| f.in_cascade) {
                let list = if thread_target { &mut tline } else { &mut line };
                let input = self.place_reply(list, target_msg, target_scope, f.agent, init);
                first_touch.push((f.agent, input));
                self.also.insert(f.aim);
            }
        }
        for f in faulty
            .iter()
            .filter(|f| f.aim == Aim::MissingRecoveryPoint && !f.late)
        {
            self.plant_rp(f.agent, plan.variant_of(Aim::MissingRecoveryPoint));
        }

        // Activity elsewhere after a faulty agent's first participation, and (allowed) a
        // suffix agent's turn elsewhere before the target.
        for f in faulty.iter().filter(|f| f.aim == Aim::ActivityElsewhere) {
            let Some(&(_, anchor)) = first_touch.iter().find(|(a, _)| *a == f.agent) else {
                continue;
            };
            let v = plan.variant_of(Aim::ActivityElsewhere);
            let human = humans[v % humans.len()];
            let msgs = match v % 3 {
                2 if !middle.is_empty() => {
                    let thread = middle[v % middle.len()];
                    self.side_turn(thread, human, f.agent, true, None)
                }
                1 => {
                    let side = self.side_scope();
                    let status = if v & 8 == 0 {
                        OutboxStatus::Delivered
                    } else {
                        OutboxStatus::Leased
                    };
                    self.side_turn(side, human, f.agent, false, Some(status))
                }
                _ => {
                    let side = self.side_scope();
                    self.side_turn(side, human, f.agent, true, None)
                }
            };
            self.inserts.push(Insert {
                anchor,
                before: false,
                msgs,
            });
        }
        let healthy: Vec<usize> = first_touch
            .iter()
            .map(|(agent, _)| *agent)
            .filter(|agent| suffix_agents.contains(agent))
            .collect();
        if r.early_elsewhere && !healthy.is_empty() {
            let agent = healthy[usize::from(r.early_pick) % healthy.len()];
            let human = humans[usize::from(r.early_pick) % humans.len()];
            let side = self.side_scope();
            let msgs = self.side_turn(side, human, agent, true, None);
            self.inserts.push(Insert {
                anchor: target_msg,
                before: true,
                msgs,
            });
            self.features.insert(Feature::EarlierActivityElsewhere);
        }

        // The initiator.
        self.actor = match plan.aim {
            Aim::SystemInitiator => Actor::System,
            Aim::AgentInitiator if !agents.is_empty() => {
                let agent = agents[plan.variant_of(Aim::AgentInitiator) % agents.len()];
                Actor::Agent(self.agents[agent].id.clone())
            }
            _ => Actor::Human(self.humans[init].0.clone()),
        };
        if thread_target {
            streams[0].msgs = tline;
        }
        self.also.remove(&plan.aim);
        let mut all = vec![Stream {
            msgs: line,
            after: None,
        }];
        all.extend(streams);
        all.extend(fork_streams);
        self.merge_family(main, all)
    }

    /// The position of `m` in `list` (its length when absent).
    fn order_index_in(&self, list: &[usize], m: usize) -> usize {
        list.iter().position(|&x| x == m).unwrap_or(list.len())
    }

    /// Makes `agent` answer the first visible human message of `scope` in `list` from `from`
    /// on (adding a round of `author` when there is none); returns that input.
    fn place_reply(
        &mut self,
        list: &mut Vec<usize>,
        from: usize,
        scope: usize,
        agent: usize,
        author: usize,
    ) -> usize {
        let start = self.order_index_in(list, from).min(list.len());
        let found = list[start..].iter().copied().find(|&m| {
            let message = &self.msgs[m];
            message.scope == scope && matches!(message.author, Auth::Human(_)) && message.visible()
        });
        let input = match found {
            Some(input) => input,
            None => self.round(scope, &quiet(), author, &[], false, list),
        };
        let answer = self.reply(input, agent, Rp::Normal);
        let at = self.order_index_in(list, input) + 1;
        list.insert(at, answer);
        input
    }

    /// Writes the planted recovery points of a missing-recovery-point agent: none
    /// (`variant % 3 == 0`) or of another runtime's strategy.
    fn plant_rp(&mut self, agent: usize, variant: usize) {
        let rp = if variant.is_multiple_of(3) {
            Rp::Missing
        } else {
            Rp::Mismatch
        };
        for message in &mut self.msgs {
            for delivery in message.deliveries.iter_mut().filter(|d| d.agent == agent) {
                delivery.rp = rp;
            }
        }
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

const CHANNEL_NAMES: [&str; 8] = [
    "launch", "design", "infra", "release", "support", "roadmap", "hiring", "ops",
];

const THREAD_NAMES: [&str; 6] = [
    "follow-up",
    "details",
    "open question",
    "draft",
    "review",
    "numbers",
];

const HUMAN_LINES: [&str; 16] = [
    "summarise the open release blockers",
    "draft the changelog for v3",
    "estimate the budget for the launch",
    "list the flaky tests of last week",
    "rename the billing module",
    "write a tweet about the new search",
    "check the migration plan for risks",
    "outline the incident report",
    "compare the two hosting offers",
    "collect the feedback on the roadmap",
    "prepare the agenda for Monday",
    "tally the votes on the logo",
    "find the slowest endpoints",
    "review the onboarding doc",
    "propose names for the new team",
    "sketch the Q3 milestones",
];

const AGENT_LINES: [&str; 10] = [
    "Done, here is the summary",
    "Two items are still open",
    "Draft ready for review",
    "The estimate comes to 42k",
    "Renamed and tests pass",
    "Three risks stand out",
    "Report outline follows",
    "The managed offer is cheaper",
    "Feedback collected in the doc",
    "Agenda posted",
];

const SYSTEM_LINES: [&str; 3] = [
    "Bob pinned a message",
    "The channel topic changed",
    "A member joined",
];

const SERVICE_LINES: [&str; 2] = ["Reminder: review due Friday", "Build 418 passed"];

const APP_LINES: [&str; 2] = [
    "Calendar: review meeting booked",
    "Tracker: issue moved to done",
];

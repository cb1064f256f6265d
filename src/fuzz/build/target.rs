//! The target's conversation, built around the target round, with the guards planted in it
//! (see the module documentation of [`super`]).

use std::collections::BTreeSet;

use rewind_driver_protocol::Actor;

use super::text::CHANNEL_NAMES;
use super::{Auth, Builder, Delivery, Insert, Life, Rp, Stream, RUNTIMES, UNSUPPORTED};
use crate::fixtures::{OutboxStatus, ScopeKind};
use crate::fuzz::recipe::{RoundRecipe, ThreadRecipe};
use crate::fuzz::shape::{Aim, Feature};

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

/// The target conversation while it is built, phase by phase.
struct Layout {
    plan: Plan,
    thread_target: bool,
    cold_target: bool,
    /// The target is an agent's reply ([`Aim::NotOwnTarget`]).
    not_own_by_agent: bool,
    /// The initiator.
    init: usize,
    humans: Vec<usize>,
    /// The humans besides the initiator.
    others: Vec<usize>,
    agents: Vec<usize>,
    /// Agents the suffix reaches: healthy.
    suffix_agents: Vec<usize>,
    /// Agents of earlier messages only: anything.
    earlier_agents: Vec<usize>,
    main: usize,
    target_scope: usize,
    faulty: Vec<Faulty>,
    late_agent: Option<usize>,
    /// The main line's messages in order.
    line: Vec<usize>,
    /// A thread target's thread, in order.
    tline: Vec<usize>,
    streams: Vec<Stream>,
    /// The threads planted on suffix messages.
    fork_streams: Vec<Stream>,
    live_parents: BTreeSet<usize>,
    target_msg: usize,
    /// Each reached agent's first input in the suffix.
    first_touch: Vec<(usize, usize)>,
    /// Threads on earlier messages.
    middle: Vec<usize>,
    /// The last human message before the target round.
    last_human: Option<usize>,
    fork_parent: Option<usize>,
    /// Another human's round goes into the cascaded thread.
    cascade_variant: bool,
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
    pub(super) fn target_family(&mut self) -> Vec<usize> {
        let mut l = self.target_layout();
        self.history(&mut l);
        self.target_round(&mut l);
        self.suffix(&mut l);
        self.threads(&mut l);
        self.elsewhere(&mut l);
        self.finish_target(l)
    }

    /// The target conversation's plan, scope, humans and agents (the faulty ones included).
    fn target_layout(&mut self) -> Layout {
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

        Layout {
            plan,
            thread_target,
            cold_target,
            not_own_by_agent,
            init,
            humans,
            others,
            agents,
            suffix_agents,
            earlier_agents,
            main,
            target_scope: main,
            faulty,
            late_agent,
            line: Vec::new(),
            tline: Vec::new(),
            streams: Vec::new(),
            fork_streams: Vec::new(),
            live_parents: BTreeSet::new(),
            target_msg: 0,
            first_touch: Vec::new(),
            middle: Vec::new(),
            last_human: None,
            fork_parent: None,
            cascade_variant: false,
        }
    }

    /// Cold history and the rounds before the target (or before a thread target's fork).
    fn history(&mut self, l: &mut Layout) {
        let r = self.r;
        let family = &r.target;
        let code = "t";
        // Cold history; a cold target is the initiator's first cold message.
        let mut cold_rounds = family.cold.clone();
        if l.cold_target && cold_rounds.is_empty() {
            cold_rounds.push(family.target.clone());
        }
        for (i, recipe) in cold_rounds.iter().enumerate() {
            let author = if l.cold_target && i == 0 {
                l.init
            } else {
                l.humans[usize::from(recipe.author) % l.humans.len()]
            };
            let human = self.round(l.main, recipe, author, &l.agents, true, &mut l.line);
            if l.cold_target && i == 0 {
                l.target_msg = human;
            }
        }

        // Rounds before the target, an earlier rewind's tombstones among them. A thread target
        // forks from one of them; the l.main l.line goes on meanwhile, with l.agents the suffix does
        // not reach.
        let mut prefix_rounds = family.prefix.clone();
        if l.thread_target && prefix_rounds.is_empty() {
            prefix_rounds.push(family.target.clone());
        }
        let fork_round = if l.thread_target {
            usize::from(family.row_picks[1]) % prefix_rounds.len()
        } else {
            prefix_rounds.len()
        };
        let tomb = family
            .tombstones
            .as_ref()
            .filter(|_| !prefix_rounds.is_empty());
        let tomb_at = tomb.map_or(usize::MAX, |t| usize::from(t.at) % prefix_rounds.len());
        let mut i = 0;
        while i < prefix_rounds.len() {
            // The fork round's replies already follow the fork, so they may come after the
            // target: from it on, only l.agents the suffix does not reach answer.
            let pool = if i >= fork_round {
                l.earlier_agents.clone()
            } else {
                l.agents.clone()
            };
            if let (Some(t), true) = (tomb, i == tomb_at) {
                let end = (i + usize::from(t.len)).min(prefix_rounds.len());
                let author = l.humans[usize::from(prefix_rounds[i].author) % l.humans.len()];
                self.tombstoned_rounds(
                    code,
                    l.main,
                    &prefix_rounds[i..end],
                    author,
                    &pool,
                    t.cascade,
                    &mut l.line,
                );
                if (i..end).contains(&fork_round) {
                    // The fork round was tombstoned: fork from the rewind's notice.
                    l.fork_parent = l.line.last().copied();
                }
                i = end;
                continue;
            }
            let author = l.humans[usize::from(prefix_rounds[i].author) % l.humans.len()];
            let human = self.round(l.main, &prefix_rounds[i], author, &pool, false, &mut l.line);
            if i == fork_round {
                l.fork_parent = Some(human);
            }
            if i <= fork_round {
                l.last_human = Some(human);
            }
            i += 1;
        }
    }

    /// The target's line (the main line, or a reply thread of it) up to the target round.
    fn target_round(&mut self, l: &mut Layout) {
        let r = self.r;
        let family = &r.target;
        let code = "t";
        // The target's line: the l.main l.line, or a reply thread of it.
        l.target_scope = if l.thread_target {
            let parent = l.fork_parent.or(l.line.last().copied()).unwrap_or_default();
            l.live_parents.insert(parent);
            let thread = self.add_thread(code, parent, false);
            self.scopes[thread].humans.insert(l.init);
            l.last_human = None;
            for recipe in &family.thread_prefix {
                let author = l.humans[usize::from(recipe.author) % l.humans.len()];
                l.last_human =
                    Some(self.round(thread, recipe, author, &l.agents, false, &mut l.tline));
            }
            l.streams.push(Stream {
                msgs: Vec::new(),
                after: Some(parent),
            });
            thread
        } else {
            l.main
        };
        if l.late_agent.is_some() && l.last_human.is_none() {
            l.last_human =
                Some(self.round(l.target_scope, &quiet(), l.init, &[], false, &mut l.tline));
        }

        // The target round.
        if l.cold_target {
            // The target is cold; everything after it is the suffix.
        } else if l.plan.aim == Aim::AlreadyRewound {
            let first = self.tombstoned_rounds(
                code,
                l.target_scope,
                std::slice::from_ref(&family.target),
                l.init,
                &l.suffix_agents,
                false,
                &mut l.tline,
            );
            l.target_msg = first;
        } else {
            let author = if l.plan.aim == Aim::NotOwnTarget && !l.not_own_by_agent {
                l.others
                    .get(usize::from(family.target.author) % l.others.len().max(1))
                    .copied()
                    .unwrap_or(l.init)
            } else {
                l.init
            };
            let human = self.push(l.target_scope, Auth::Human(author), false);
            l.tline.push(human);
            l.target_msg = human;
            let mut repliers: Vec<usize> = Vec::new();
            if !l.suffix_agents.is_empty() {
                for pick in &family.target.replies {
                    let agent = l.suffix_agents[usize::from(*pick) % l.suffix_agents.len()];
                    if !repliers.contains(&agent) {
                        repliers.push(agent);
                    }
                }
                if l.not_own_by_agent && repliers.is_empty() {
                    repliers.push(l.suffix_agents[0]);
                }
            }
            for (n, agent) in repliers.into_iter().enumerate() {
                let answer = self.reply(human, agent, Rp::Normal);
                l.tline.push(answer);
                l.first_touch.push((agent, human));
                if l.not_own_by_agent && n == 0 {
                    l.target_msg = answer;
                }
            }
            let extra = if l.plan.aim == Aim::SystemTarget {
                Some(
                    [Auth::System, Auth::Service, Auth::App]
                        [l.plan.variant_of(Aim::SystemTarget) % 3],
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
                let message = self.push(l.target_scope, extra, false);
                if matches!(extra, Auth::Human(_)) {
                    self.msgs[message].life = Life::Recalled;
                    self.features.insert(Feature::Recalled);
                }
                l.tline.push(message);
                if l.plan.aim == Aim::SystemTarget {
                    l.target_msg = message;
                }
            }
            // A late answer comes right after the target, whatever the target round holds.
            if let (Some(agent), Some(input)) = (l.late_agent, l.last_human) {
                self.msgs[input].deliveries.push(Delivery {
                    agent,
                    rp: Rp::Normal,
                    outbox: None,
                });
                let answer = self.push(l.target_scope, Auth::Agent(agent), false);
                self.msgs[answer].reply_to = Some(input);
                let at = self.order_index_in(&l.tline, l.target_msg) + 1;
                l.tline.insert(at.min(l.tline.len()), answer);
                self.also.insert(Aim::MissingRecoveryPoint);
            }
        }
        self.target = l.target_msg;
    }

    /// The suffix rounds, the guards planted among them, and the faulty agents' answers.
    fn suffix(&mut self, l: &mut Layout) {
        let r = self.r;
        let family = &r.target;
        let code = "t";
        // The suffix rounds: the initiator's, answered by the suffix l.agents; another human's
        // round, or recalled message, when that guard is planted.
        let other_later = l
            .plan
            .has(Aim::OtherHumanLater)
            .then(|| l.plan.variant_of(Aim::OtherHumanLater) % 3)
            .filter(|_| !l.others.is_empty());
        l.cascade_variant = other_later == Some(1) && !l.thread_target;
        let mut suffix_rounds = family.suffix.clone();
        let mut other_round = None;
        if other_later == Some(0) || (other_later == Some(1) && l.thread_target) {
            other_round = Some(suffix_rounds.len() / 2);
            suffix_rounds.insert(suffix_rounds.len() / 2, family.target.clone());
        }
        for (i, recipe) in suffix_rounds.iter().enumerate() {
            let author = if other_round == Some(i) {
                self.also.insert(Aim::OtherHumanLater);
                l.others[usize::from(recipe.author) % l.others.len()]
            } else {
                l.init
            };
            let human = self.round(
                l.target_scope,
                recipe,
                author,
                &l.suffix_agents,
                false,
                &mut l.tline,
            );
            for delivery in &self.msgs[human].deliveries {
                if !l.first_touch.iter().any(|(a, _)| *a == delivery.agent) {
                    l.first_touch.push((delivery.agent, human));
                }
            }
        }
        if other_later == Some(2) {
            let other = l.others[l.plan.variant_of(Aim::OtherHumanLater) / 3 % l.others.len()];
            let message = self.push(l.target_scope, Auth::Human(other), false);
            self.msgs[message].life = Life::Recalled;
            self.features.insert(Feature::Recalled);
            l.tline.push(message);
            self.also.insert(Aim::OtherHumanLater);
        }

        // A later reply thread: a live thread on a suffix message that is not the last.
        if l.plan.has(Aim::LaterReplyThread) && !l.thread_target {
            // The suffix only: the target round may start before the target (an agent's or a
            // system message as the target).
            let suffix = |b: &Self, list: &[usize]| {
                let from = b.order_index_in(list, l.target_msg).min(list.len());
                b.visible_hot(&list[from..], l.target_scope)
            };
            let mut visible = suffix(self, &l.tline);
            if visible.len() < 2 {
                self.round(l.target_scope, &quiet(), l.init, &[], false, &mut l.tline);
                visible = suffix(self, &l.tline);
            }
            if visible.len() >= 2 {
                let choices = &visible[..visible.len() - 1];
                let parent = choices[l.plan.variant_of(Aim::LaterReplyThread) % choices.len()];
                l.live_parents.insert(parent);
                let thread = self.add_thread(code, parent, false);
                let mut msgs = Vec::new();
                self.round(thread, &quiet(), l.init, &[], false, &mut msgs);
                l.fork_streams.push(Stream {
                    msgs,
                    after: Some(parent),
                });
                self.also.insert(Aim::LaterReplyThread);
            }
        }
        if !l.thread_target {
            l.line.append(&mut l.tline);
        }

        // Faulty l.agents answer in the target's l.line (those meant for the cascade later).
        for f in l.faulty.iter().filter(|f| !f.late && !f.in_cascade) {
            let list = if l.thread_target {
                &mut l.tline
            } else {
                &mut l.line
            };
            let input = self.place_reply(list, l.target_msg, l.target_scope, f.agent, l.init);
            l.first_touch.push((f.agent, input));
            self.also.insert(f.aim);
        }
    }

    /// Reply threads on earlier messages, archived ones on suffix messages, and the tail thread.
    fn threads(&mut self, l: &mut Layout) {
        let r = self.r;
        let family = &r.target;
        let code = "t";
        // Threads on earlier messages (and archived ones on suffix messages), with the l.agents
        // the suffix does not reach.
        let earlier: Vec<usize> = if l.thread_target {
            self.visible_hot(&l.line, l.main)
        } else {
            let before: Vec<usize> = l
                .line
                .iter()
                .copied()
                .take_while(|&m| m != l.target_msg)
                .collect();
            self.visible_hot(&before, l.main)
        };
        let suffix_main: Vec<usize> = if l.thread_target {
            Vec::new()
        } else {
            let from = self.order_index_in(&l.line, l.target_msg);
            let after = l.line[from.min(l.line.len())..].to_vec();
            self.visible_hot(&after, l.main)
        };
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
                    &l.humans,
                    &l.earlier_agents,
                    &mut l.live_parents,
                )
            } else {
                self.thread_on(
                    code,
                    &earlier,
                    thread,
                    &l.humans,
                    &l.earlier_agents,
                    &mut l.live_parents,
                )
            };
            if let Some(stream) = stream {
                let scope = self.msgs[stream.msgs[0]].scope;
                if !on_suffix {
                    if !self.scopes[scope].archived {
                        self.features.insert(Feature::MiddleThread);
                    }
                    l.middle.push(scope);
                }
                l.streams.push(stream);
            }
        }

        // The tail thread: on a l.main-l.line target, the one that cascades (the initiator's, with
        // the suffix l.agents) unless archived; on a thread target, one on the l.main l.line's last
        // message.
        let forced = l.cascade_variant || l.faulty.iter().any(|f| f.in_cascade);
        let mut cascaded = false;
        if !l.thread_target && (family.tail.is_some() || forced) {
            let tail_parent = suffix_main.last().copied();
            if let Some(parent) = tail_parent.filter(|p| !l.live_parents.contains(p)) {
                let recipe = family.tail.clone().unwrap_or(ThreadRecipe {
                    parent: 0,
                    archived: false,
                    rounds: vec![family.target.clone()],
                });
                let archived = recipe.archived && !forced;
                l.live_parents.insert(parent);
                let thread = self.add_thread(code, parent, archived);
                let mut msgs = Vec::new();
                if archived {
                    self.rounds(
                        thread,
                        &recipe.rounds,
                        &l.humans,
                        &l.earlier_agents,
                        false,
                        &mut msgs,
                    );
                } else {
                    cascaded = true;
                    for round in &recipe.rounds {
                        let human =
                            self.round(thread, round, l.init, &l.suffix_agents, false, &mut msgs);
                        for delivery in &self.msgs[human].deliveries {
                            if !l.first_touch.iter().any(|(a, _)| *a == delivery.agent) {
                                l.first_touch.push((delivery.agent, human));
                            }
                        }
                    }
                    for f in l.faulty.iter().filter(|f| f.in_cascade) {
                        let input = msgs[0];
                        let answer = self.reply(input, f.agent, Rp::Normal);
                        msgs.insert(1, answer);
                        l.first_touch.push((f.agent, input));
                        self.also.insert(f.aim);
                    }
                    if l.cascade_variant {
                        let other =
                            l.others[l.plan.variant_of(Aim::OtherHumanLater) / 3 % l.others.len()];
                        self.round(
                            thread,
                            &recipe.rounds[0],
                            other,
                            &l.suffix_agents,
                            false,
                            &mut msgs,
                        );
                        self.also.insert(Aim::OtherHumanLater);
                    }
                }
                l.streams.push(Stream {
                    msgs,
                    after: Some(parent),
                });
            }
        } else if let (Some(tail), true) = (&family.tail, l.thread_target) {
            if let Some(&last) = self.visible_hot(&l.line, l.main).last() {
                if let Some(stream) = self.thread_on(
                    code,
                    &[last],
                    tail,
                    &l.humans,
                    &l.earlier_agents,
                    &mut l.live_parents,
                ) {
                    l.streams.push(stream);
                }
            }
        }
        if !cascaded {
            // No cascade could be made: the l.agents meant for it answer in the target's l.line.
            for f in l.faulty.iter().filter(|f| f.in_cascade) {
                let list = if l.thread_target {
                    &mut l.tline
                } else {
                    &mut l.line
                };
                let input = self.place_reply(list, l.target_msg, l.target_scope, f.agent, l.init);
                l.first_touch.push((f.agent, input));
                self.also.insert(f.aim);
            }
        }
        for f in l
            .faulty
            .iter()
            .filter(|f| f.aim == Aim::MissingRecoveryPoint && !f.late)
        {
            self.plant_rp(f.agent, l.plan.variant_of(Aim::MissingRecoveryPoint));
        }
    }

    /// Activity elsewhere: a faulty agent's after the target, a suffix agent's before it.
    fn elsewhere(&mut self, l: &mut Layout) {
        let r = self.r;
        // Activity elsewhere after a l.faulty agent's first participation, and (allowed) a
        // suffix agent's turn elsewhere before the target.
        for f in l.faulty.iter().filter(|f| f.aim == Aim::ActivityElsewhere) {
            let Some(&(_, anchor)) = l.first_touch.iter().find(|(a, _)| *a == f.agent) else {
                continue;
            };
            let v = l.plan.variant_of(Aim::ActivityElsewhere);
            let human = l.humans[v % l.humans.len()];
            let msgs = match v % 3 {
                2 if !l.middle.is_empty() => {
                    let thread = l.middle[v % l.middle.len()];
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
        let healthy: Vec<usize> = l
            .first_touch
            .iter()
            .map(|(agent, _)| *agent)
            .filter(|agent| l.suffix_agents.contains(agent))
            .collect();
        if r.early_elsewhere && !healthy.is_empty() {
            let agent = healthy[usize::from(r.early_pick) % healthy.len()];
            let human = l.humans[usize::from(r.early_pick) % l.humans.len()];
            let side = self.side_scope();
            let msgs = self.side_turn(side, human, agent, true, None);
            self.inserts.push(Insert {
                anchor: l.target_msg,
                before: true,
                msgs,
            });
            self.features.insert(Feature::EarlierActivityElsewhere);
        }
    }

    /// The initiator, and the conversation's messages merged into one order.
    fn finish_target(&mut self, mut l: Layout) -> Vec<usize> {
        // The initiator.
        self.actor = match l.plan.aim {
            Aim::SystemInitiator => Actor::System,
            Aim::AgentInitiator if !l.agents.is_empty() => {
                let agent = l.agents[l.plan.variant_of(Aim::AgentInitiator) % l.agents.len()];
                Actor::Agent(self.agents[agent].id.clone())
            }
            _ => Actor::Human(self.humans[l.init].0.clone()),
        };
        if l.thread_target {
            l.streams[0].msgs = l.tline;
        }
        self.also.remove(&l.plan.aim);
        let mut all = vec![Stream {
            msgs: l.line,
            after: None,
        }];
        all.extend(l.streams);
        all.extend(l.fork_streams);
        self.merge_family(l.main, all)
    }

    /// The position of `m` in `list` (its length when absent).
    pub(super) fn order_index_in(&self, list: &[usize], m: usize) -> usize {
        list.iter().position(|&x| x == m).unwrap_or(list.len())
    }

    /// Makes `agent` answer the first visible human message of `scope` in `list` from `from`
    /// on (adding a round of `author` when there is none); returns that input.
    pub(super) fn place_reply(
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
    pub(super) fn plant_rp(&mut self, agent: usize, variant: usize) {
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

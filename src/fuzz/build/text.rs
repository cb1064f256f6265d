//! The words of generated messages and scopes; the caller adds each message's canary.

use super::{Auth, Builder, Life};

impl Builder<'_> {
    /// A line of text for message `m`.
    pub(super) fn phrase(&self, m: usize) -> String {
        let message = &self.msgs[m];
        let pick = crate::fuzz::ids::mix(self.seed, self.index, m as u64) as usize;
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
    pub(super) fn tombstone_author(&self, notice: usize) -> String {
        self.msgs
            .iter()
            .find_map(|message| match (message.life, message.author) {
                (Life::Rewound(n), Auth::Human(h)) if n == notice => Some(self.humans[h].1.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "Someone".to_owned())
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

pub(super) const CHANNEL_NAMES: [&str; 8] = [
    "launch", "design", "infra", "release", "support", "roadmap", "hiring", "ops",
];

pub(super) const THREAD_NAMES: [&str; 6] = [
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

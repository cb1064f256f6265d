//! [`SuffixText`]: the text of the rewound messages, to tell whether a row still quotes it; and
//! [`instant`], to compare timestamps whatever their rendering.

use std::collections::BTreeSet;

use chrono::{DateTime, FixedOffset};

use super::spec;
use super::state::{Message, State};
use crate::leak_scan::canaries_in;

/// The shortest message content looked for verbatim: shorter ones are too likely to occur by
/// chance.
const MIN_QUOTED_CONTENT: usize = 8;

/// What identifies the content of a set of messages: the canaries in it (fixtures give every
/// message a unique `CANARY-` token) and each whole content of some length (a rewind notice's
/// aside), less anything that also occurs in the content of a message outside the set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuffixText {
    canaries: BTreeSet<String>,
    contents: BTreeSet<String>,
}

impl SuffixText {
    /// The text of messages `ids` of `state`.
    pub fn of<'a>(state: &State, ids: impl IntoIterator<Item = &'a String>) -> Self {
        let ids: BTreeSet<&String> = ids.into_iter().collect();
        let mut text = SuffixText::default();
        for id in &ids {
            if let Some(m) = state.message(id) {
                text.canaries.extend(canaries_in(&m.content));
                if m.content.chars().count() >= MIN_QUOTED_CONTENT && !is_notice(m) {
                    text.contents.insert(m.content.clone());
                }
            }
        }
        for other in state.messages.values().filter(|m| !ids.contains(&m.id)) {
            let theirs = canaries_in(&other.content);
            text.canaries.retain(|c| !theirs.contains(c));
            text.contents
                .retain(|c| !other.content.contains(c.as_str()));
        }
        text
    }

    /// The first canary or content of the set that `text` quotes.
    pub fn quoted_in(&self, text: &str) -> Option<String> {
        let found = canaries_in(text);
        self.canaries
            .iter()
            .find(|c| found.contains(c))
            .or_else(|| self.contents.iter().find(|c| text.contains(c.as_str())))
            .cloned()
    }

    /// Whether nothing identifies the set's content.
    pub fn is_empty(&self) -> bool {
        self.canaries.is_empty() && self.contents.is_empty()
    }
}

/// Whether `message` is a rewind notice: its wording is the implementation's own, the same for
/// every rewind, so a later notice repeating an earlier, rewound one quotes nothing.
fn is_notice(message: &Message) -> bool {
    message
        .client_message_id
        .as_deref()
        .is_some_and(|id| id.starts_with(spec::NOTICE_PREFIX))
}

/// A timestamp as PostgreSQL renders it in JSON (RFC 3339), as an instant.
pub fn instant(text: &str) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .or_else(|| DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f%#z").ok())
}

/// The latest of some timestamps (unparseable ones ignored).
pub fn latest<'a>(times: impl IntoIterator<Item = &'a str>) -> Option<DateTime<FixedOffset>> {
    times.into_iter().filter_map(instant).max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::testkit::Seed;

    #[test]
    fn finds_canaries_and_contents_but_not_those_of_other_messages() {
        let state = Seed::dm().state();
        let text = SuffixText::of(&state, &["m-3".to_owned()]);
        assert_eq!(
            text.quoted_in(r#"{"preview": "see CANARY-m-3"}"#),
            Some("CANARY-m-3".to_owned())
        );
        assert_eq!(text.quoted_in("CANARY-m-30 is another one"), None);
        assert_eq!(text.quoted_in("CANARY-m-1"), None);
    }

    #[test]
    fn instants_compare_across_offsets() {
        assert_eq!(
            instant("2026-01-01T01:00:00+01:00"),
            instant("2026-01-01T00:00:00+00:00")
        );
        assert_eq!(
            latest(["2026-01-01T00:00:00+00:00", "2026-01-01T00:05:00+00:00"]),
            instant("2026-01-01T00:05:00Z")
        );
    }
}

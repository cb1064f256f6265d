//! Ordering: threads interleaved with their main line after their parent, conversations with
//! each other, planted messages placed around their anchors, then every message numbered.

use std::collections::BTreeSet;

use super::{Builder, Life, Stream};
use crate::fuzz::shape::Feature;

impl Builder<'_> {
    /// Merges a conversation's streams: each thread after its parent, interleaved by picks.
    pub(super) fn merge_family(&mut self, main: usize, streams: Vec<Stream>) -> Vec<usize> {
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
    pub(super) fn merge(&mut self, families: Vec<Vec<usize>>) -> Vec<usize> {
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
    pub(super) fn apply_inserts(&mut self) {
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

    /// Gives every message its `seq`, `global_seq`, id and content, in merged order.
    pub(super) fn number(&mut self) {
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
}

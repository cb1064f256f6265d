//! Initiation guards (spec 3 and 4): pure checks over loaded message facts.

use crate::error::SpecError;
use crate::variant::Variant;

/// A `scope_messages` row as the guards need it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MessageFacts {
    /// The message id.
    pub id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// Its scope.
    pub scope_id: String,
    /// Its scope-local seq.
    pub seq: i64,
    /// human / agent / system / service / app.
    pub author_kind: String,
    /// The human author, for human messages.
    pub author_user_id: Option<String>,
    /// The agent author, for agent messages.
    pub author_agent_id: Option<String>,
    /// hot or cold.
    pub storage_tier: String,
}

/// The target must be the initiator's own, human-authored, hot message.
///
/// System, service and app messages are refused with their own message before ownership is
/// considered, so that a human pointing at a notice learns why.
pub fn check_target(initiator_user_id: &str, target: &MessageFacts) -> Result<(), SpecError> {
    match target.author_kind.as_str() {
        "system" | "service" | "app" => return Err(SpecError::SystemMessageTarget),
        "human" if target.author_user_id.as_deref() == Some(initiator_user_id) => {}
        _ => return Err(SpecError::NotOwnHumanMessage),
    }
    if target.storage_tier != "hot" {
        return Err(SpecError::CrossesHotColdBoundary);
    }
    Ok(())
}

/// No suffix message may lie behind the cold/archive boundary.
pub fn check_suffix_hot(suffix: &[MessageFacts]) -> Result<(), SpecError> {
    if suffix.iter().any(|m| m.storage_tier != "hot") {
        return Err(SpecError::CrossesHotColdBoundary);
    }
    Ok(())
}

/// No message of the suffix may come from another human.
pub fn check_other_humans(
    initiator_user_id: &str,
    suffix: &[MessageFacts],
) -> Result<(), SpecError> {
    let other = suffix.iter().any(|m| {
        m.author_kind == "human" && m.author_user_id.as_deref() != Some(initiator_user_id)
    });
    if other {
        return Err(SpecError::OtherHumanMessage);
    }
    Ok(())
}

/// Only the last main-line message of the suffix may have a reply thread; when it has one,
/// that thread cascades. Returns the cascading `(child scope, parent message)`, if any.
///
/// [`Variant::Alternative`] reads section 4's second bullet literally: only the target's own
/// thread cascades, when the target is the tail fork (the suffix is the target alone); a thread
/// on the suffix's last message below a strictly earlier target is refused like any later fork.
pub fn check_forks(
    suffix_ids: &[String],
    forks: &[(String, String)],
    variant: Variant,
) -> Result<Option<(String, String)>, SpecError> {
    let Some(last) = suffix_ids.last() else {
        return Ok(None);
    };
    let target_is_tail = suffix_ids.len() == 1;
    let mut tail = None;
    for (child, parent) in forks {
        if parent != last || (variant.is_alternative() && !target_is_tail) {
            return Err(SpecError::LaterReplyThread);
        }
        tail = Some((child.clone(), parent.clone()));
    }
    Ok(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, kind: &str, user: Option<&str>, tier: &str) -> MessageFacts {
        MessageFacts {
            id: id.to_owned(),
            workspace_id: "ws".to_owned(),
            scope_id: "s".to_owned(),
            seq: 1,
            author_kind: kind.to_owned(),
            author_user_id: user.map(str::to_owned),
            author_agent_id: (kind == "agent").then(|| "a".to_owned()),
            storage_tier: tier.to_owned(),
        }
    }

    #[test]
    fn target_guards_in_order() {
        let own = message("m", "human", Some("alice"), "hot");
        assert_eq!(check_target("alice", &own), Ok(()));
        assert_eq!(
            check_target("bob", &own),
            Err(SpecError::NotOwnHumanMessage)
        );
        let agent = message("m", "agent", None, "hot");
        assert_eq!(
            check_target("alice", &agent),
            Err(SpecError::NotOwnHumanMessage)
        );
        for kind in ["system", "service", "app"] {
            let m = message("m", kind, None, "hot");
            assert_eq!(
                check_target("alice", &m),
                Err(SpecError::SystemMessageTarget)
            );
        }
        let cold = message("m", "human", Some("alice"), "cold");
        assert_eq!(
            check_target("alice", &cold),
            Err(SpecError::CrossesHotColdBoundary)
        );
    }

    #[test]
    fn forks_only_at_the_tail() {
        let ids: Vec<String> = ["a", "b", "c"].map(str::to_owned).to_vec();
        for variant in Variant::ALL {
            assert_eq!(check_forks(&ids, &[], variant), Ok(None));
            let middle = vec![("t".to_owned(), "b".to_owned())];
            assert_eq!(
                check_forks(&ids, &middle, variant),
                Err(SpecError::LaterReplyThread)
            );
            // The target itself is the tail fork: its thread cascades in every variant.
            let own = vec![("t".to_owned(), "c".to_owned())];
            assert_eq!(
                check_forks(&ids[2..], &own, variant),
                Ok(Some(("t".to_owned(), "c".to_owned())))
            );
        }
        // A thread on the last message below an earlier target: the recommended reading
        // cascades it, the alternative one refuses.
        let tail = vec![("t".to_owned(), "c".to_owned())];
        assert_eq!(
            check_forks(&ids, &tail, Variant::Recommended),
            Ok(Some(("t".to_owned(), "c".to_owned())))
        );
        assert_eq!(
            check_forks(&ids, &tail, Variant::Alternative),
            Err(SpecError::LaterReplyThread)
        );
    }
}

//! OpenCode identifiers: `ses_`, `msg_`, `prt_` followed by 26 characters, ascending in creation
//! order. Like the real `Identifier.ascending`, the first 12 characters are the hex of the low 48
//! bits of `milliseconds << 12 | counter` and the last 14 are random base62, so ids made later
//! compare greater (within the ~2 years before the time field wraps, as in the real runtime).

use std::sync::Mutex;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The kinds of ids the mock hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// `ses_...`
    Session,
    /// `msg_...`
    Message,
    /// `prt_...`
    Part,
}

impl IdKind {
    /// The prefix without its underscore, as the real schema checks it (`"ses"`, `"msg"`,
    /// `"prt"`).
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Session => "ses",
            IdKind::Message => "msg",
            IdKind::Part => "prt",
        }
    }
}

struct Clock {
    last_ms: i64,
    counter: u64,
}

static CLOCK: Mutex<Clock> = Mutex::new(Clock {
    last_ms: 0,
    counter: 0,
});

/// A new ascending id of `kind`.
pub fn ascending(kind: IdKind) -> String {
    let now = chrono::Utc::now().timestamp_millis();
    let value = {
        let mut clock = CLOCK.lock().unwrap_or_else(|p| p.into_inner());
        // Never go backwards inside one process, even if the wall clock does.
        let ms = now.max(clock.last_ms);
        if ms != clock.last_ms {
            clock.last_ms = ms;
            clock.counter = 0;
        }
        clock.counter += 1;
        ((ms as u64) << 12).wrapping_add(clock.counter)
    };
    let time = value & 0xffff_ffff_ffff;
    format!("{}_{:012x}{}", kind.prefix(), time, random_base62(14))
}

fn random_base62(len: usize) -> String {
    let mut out = String::with_capacity(len);
    while out.len() < len {
        for byte in uuid::Uuid::new_v4().into_bytes() {
            // 248 = 62 * 4: rejection sampling keeps the characters uniform.
            if byte < 248 && out.len() < len {
                out.push(BASE62[(byte % 62) as usize] as char);
            }
        }
    }
    out
}

/// Whether `id` is safe to use as a file name (the mock stores a session per file).
pub fn is_storable(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A random lowercase word pair such as `brave-comet`, like the real session `slug`.
pub fn slug() -> String {
    const ADJECTIVES: [&str; 8] = [
        "brave", "calm", "eager", "gentle", "lucky", "quiet", "swift", "witty",
    ];
    const NOUNS: [&str; 8] = [
        "comet", "falcon", "harbor", "meadow", "nebula", "otter", "pine", "river",
    ];
    let bytes = uuid::Uuid::new_v4().into_bytes();
    format!(
        "{}-{}",
        ADJECTIVES[(bytes[0] % 8) as usize],
        NOUNS[(bytes[1] % 8) as usize]
    )
}

/// A fake 40-hex snapshot (git tree) hash, as the real runtime records when snapshots are on.
pub fn snapshot_hash() -> String {
    let a = uuid::Uuid::new_v4().simple().to_string();
    let b = uuid::Uuid::new_v4().simple().to_string();
    format!("{a}{}", &b[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_real_shape_and_ascend() {
        let mut previous = String::new();
        for _ in 0..500 {
            let id = ascending(IdKind::Message);
            assert!(id.starts_with("msg_"), "{id}");
            assert_eq!(id.len(), 4 + 26, "{id}");
            assert!(id > previous, "{id} <= {previous}");
            assert!(is_storable(&id));
            previous = id;
        }
        assert!(ascending(IdKind::Session).starts_with("ses_"));
        assert!(ascending(IdKind::Part).starts_with("prt_"));
    }

    #[test]
    fn only_plain_ids_are_storable() {
        assert!(!is_storable("ses_../../etc"));
        assert!(!is_storable(""));
        assert!(!is_storable("ses/x"));
        assert!(is_storable("ses_abc-DEF_1"));
        assert_eq!(snapshot_hash().len(), 40);
        assert!(slug().contains('-'));
    }
}

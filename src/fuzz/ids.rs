//! Deterministic ids for generated cases: a hash of the run's seed, the case index and a salt,
//! spelled as each runtime spells its ids (UUIDs for codex threads and claude sessions and
//! entries, `ses_`/`msg_` ids for OpenCode).

/// SplitMix64's finaliser.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A 64-bit hash of `(seed, index, salt)`.
pub(super) fn mix(seed: u64, index: u64, salt: u64) -> u64 {
    splitmix(splitmix(splitmix(seed) ^ index) ^ salt)
}

/// A salt from a text.
pub(super) fn salt(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A version-4 UUID derived from `(seed, index, salt)`.
pub(super) fn uuid(seed: u64, index: u64, salt_text: &str) -> String {
    let s = salt(salt_text);
    let high = mix(seed, index, s);
    let low = mix(seed, index, s ^ 0x5555_5555_5555_5555);
    let time_low = high >> 32;
    let time_mid = (high >> 16) & 0xffff;
    let version = 0x4000 | (high & 0x0fff);
    let variant = 0x8000 | ((low >> 48) & 0x3fff);
    let node = low & 0xffff_ffff_ffff;
    format!("{time_low:08x}-{time_mid:04x}-{version:04x}-{variant:04x}-{node:012x}")
}

/// An OpenCode id: `prefix_` and 26 characters; `ordinal` leads, so ids of one session ascend
/// in the order they were made, as the real runtime's do.
pub(super) fn opencode(
    prefix: &str,
    ordinal: u64,
    seed: u64,
    index: u64,
    salt_text: &str,
) -> String {
    let s = salt(salt_text);
    let tail = format!(
        "{:016x}{:016x}",
        mix(seed, index, s),
        mix(seed, index, s ^ 0xaaaa)
    );
    format!("{prefix}_0{ordinal:06x}{}", &tail[..19])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_parse_and_differ() {
        let a = uuid(1, 2, "agent-1");
        let b = uuid(1, 2, "agent-2");
        let c = uuid(1, 3, "agent-1");
        assert_ne!(a, b);
        assert_ne!(a, c);
        for id in [&a, &b, &c] {
            let parsed = uuid::Uuid::parse_str(id).unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(parsed.get_version_num(), 4, "{id}");
        }
        assert_eq!(a, uuid(1, 2, "agent-1"));
    }

    #[test]
    fn opencode_ids_ascend_and_have_the_real_length() {
        let first = opencode("msg", 1, 7, 0, "x");
        let second = opencode("msg", 2, 7, 0, "a");
        assert!(first < second, "{first} < {second}");
        assert_eq!(first.len(), "msg_".len() + 26);
    }
}

//! Where a committed generated text first differs from what generating it gives now.

/// The first line at which `committed` and `generated` differ, or how their lengths differ.
pub fn first_difference(committed: &str, generated: &str) -> String {
    committed
        .lines()
        .zip(generated.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| {
            format!(
                "first difference at line {}:\n  committed: {a}\n  generated: {b}",
                i + 1
            )
        })
        .unwrap_or_else(|| {
            format!(
                "the committed copy has {} lines, the generated one {}",
                committed.lines().count(),
                generated.lines().count()
            )
        })
}

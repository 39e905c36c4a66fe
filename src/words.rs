//! How counts read in what blackbox prints: "1 packet", "2 packets", "0 packets". Owns
//! the wording of a number and its noun, nothing of what is counted.

/// `n` and its noun, plural unless `n` is one: `counted(1, "packet")` is "1 packet".
/// Nouns whose plural is not the singular and an "s" use [`counted_as`].
pub fn counted(n: u64, singular: &str) -> String {
    match n {
        1 => format!("1 {singular}"),
        _ => format!("{n} {singular}s"),
    }
}

/// `n` and its noun, given both forms: `counted_as(2, "repair", "repairs")`.
pub fn counted_as(n: u64, singular: &str, plural: &str) -> String {
    match n {
        1 => format!("1 {singular}"),
        _ => format!("{n} {plural}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1, "packet"), "1 packet");
        assert_eq!(counted(0, "packet"), "0 packets");
        assert_eq!(counted(2, "TCP connection"), "2 TCP connections");
        assert_eq!(counted_as(1, "body", "bodies"), "1 body");
        assert_eq!(counted_as(3, "body", "bodies"), "3 bodies");
    }
}

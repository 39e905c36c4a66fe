//! String interning for node names, call ids and truth tags: each distinct string is
//! stored once, in one buffer, and named by a dense `u32`. Owns only the strings.

use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;

/// A set of strings, each named by its insertion index.
///
/// One contiguous buffer plus an end offset and a hash per string costs about 20 bytes
/// beyond the text itself; a trace with a million distinct call ids stays small. The
/// hashes are kept so that growing the table, and sorting, never hash a string again:
/// rehashing from the strings, which lie all over the buffer, was a third of the time
/// spent interning a large text trace's call ids.
#[derive(Default, Clone)]
pub struct Interner {
    bytes: String,
    ends: Vec<usize>,
    hashes: Vec<u64>,
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

impl Interner {
    /// An empty interner.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `s`, adding it if it is new.
    pub fn intern(&mut self, s: &str) -> u32 {
        let hash = self.hasher.hash_one(s);
        let (bytes, ends) = (&self.bytes, &self.ends);
        if let Some(&id) = self.table.find(hash, |&id| slice(bytes, ends, id) == s) {
            return id;
        }
        self.push_new(s, hash)
    }

    /// Adds `s`, known to be new, with its hash.
    fn push_new(&mut self, s: &str, hash: u64) -> u32 {
        let id = u32::try_from(self.ends.len()).expect("more than 4 billion distinct strings");
        self.bytes.push_str(s);
        self.ends.push(self.bytes.len());
        self.hashes.push(hash);
        let hashes = &self.hashes;
        self.table
            .insert_unique(hash, id, |&id| hashes[id as usize]);
        id
    }

    /// The id of `s`, if it was interned.
    pub fn get(&self, s: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(s);
        self.table
            .find(hash, |&id| slice(&self.bytes, &self.ends, id) == s)
            .copied()
    }

    /// The string named `id`. Panics on an id this interner did not hand out.
    pub fn resolve(&self, id: u32) -> &str {
        slice(&self.bytes, &self.ends, id)
    }

    /// Renumbers the strings in byte order and returns, for each old id, its new id.
    /// Ids that order like their strings make every later tie-break independent of the
    /// order in which input was read.
    pub fn sort(&mut self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.resolve(a).cmp(self.resolve(b)));
        let mut sorted = Interner {
            bytes: String::with_capacity(self.bytes.len()),
            ends: Vec::with_capacity(order.len()),
            hashes: Vec::with_capacity(order.len()),
            table: HashTable::with_capacity(order.len()),
            hasher: self.hasher,
        };
        for &old in &order {
            sorted.push_new(self.resolve(old), self.hashes[old as usize]);
        }
        let mut new_of_old = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_of_old[old as usize] = new as u32;
        }
        *self = sorted;
        new_of_old
    }

    /// How many distinct strings there are.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether no string was interned.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

#[inline]
fn slice<'a>(bytes: &'a str, ends: &[usize], id: u32) -> &'a str {
    let id = id as usize;
    let start = if id == 0 { 0 } else { ends[id - 1] };
    &bytes[start..ends[id]]
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries((0..self.len() as u32).map(|id| self.resolve(id)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_string_gets_the_same_id() {
        let mut names = Interner::new();
        let a = names.intern("web");
        let b = names.intern("db");
        assert_eq!(names.intern("web"), a);
        assert_ne!(a, b);
        assert_eq!(names.resolve(b), "db");
        assert_eq!(names.get("db"), Some(b));
        assert_eq!(names.get("auth"), None);
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn sorting_renumbers_in_string_order() {
        let mut names = Interner::new();
        for n in ["web", "db", "auth"] {
            names.intern(n);
        }
        assert_eq!(names.sort(), vec![2, 1, 0]);
        assert_eq!((names.resolve(0), names.resolve(2)), ("auth", "web"));
        assert_eq!(names.get("db"), Some(1));
    }

    #[test]
    fn many_strings_survive_table_growth() {
        let mut ids = Interner::new();
        let all: Vec<u32> = (0..10_000).map(|i| ids.intern(&format!("id{i}"))).collect();
        for (i, &id) in all.iter().enumerate() {
            assert_eq!(ids.resolve(id), format!("id{i}"));
            assert_eq!(ids.get(&format!("id{i}")), Some(id));
        }
    }
}

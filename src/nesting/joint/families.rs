//! Every parent's children in the order they left the node, as lists threaded through
//! two arrays, and edits of one list without changing it. Owns nothing of the model.

use super::NO_CHILD;

/// `children` (in order) without `remove` and with `add` (either may be [`NO_CHILD`]).
pub(super) fn edited(
    children: impl Iterator<Item = u32> + Clone,
    remove: u32,
    add: u32,
) -> impl Iterator<Item = u32> + Clone {
    let mut add = (add != NO_CHILD).then_some(add);
    let mut rest = children.filter(move |&c| c != remove).peekable();
    std::iter::from_fn(move || match (rest.peek().copied(), add) {
        (Some(next), Some(a)) if a < next => add.take(),
        (Some(_), _) => rest.next(),
        (None, a) => {
            add = None;
            a
        }
    })
}

/// Every parent's children in the order they left B, as lists threaded through two
/// arrays: one heap block for a node instead of one per parent, and the same lists.
pub(super) struct Families {
    /// Per parent, its first child, or [`NO_CHILD`].
    pub(super) first: Vec<u32>,
    /// Per child, the next child of its parent, or [`NO_CHILD`].
    pub(super) next: Vec<u32>,
}

/// The children of one parent, in order.
#[derive(Clone)]
pub(super) struct Children<'a> {
    pub(super) next: &'a [u32],
    pub(super) at: u32,
}

impl Iterator for Children<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        let child = self.at;
        if child == NO_CHILD {
            return None;
        }
        self.at = self.next[child as usize];
        Some(child)
    }
}

impl Families {
    pub(super) fn new(parents: usize, children: usize) -> Self {
        Families {
            first: vec![NO_CHILD; parents],
            next: vec![NO_CHILD; children],
        }
    }

    pub(super) fn of(&self, p: u32) -> Children<'_> {
        Children {
            next: &self.next,
            at: self.first[p as usize],
        }
    }

    /// The child of `p` after which `k` belongs (or is), [`NO_CHILD`] for the front.
    pub(super) fn before(&self, p: u32, k: u32) -> u32 {
        let (mut previous, mut at) = (NO_CHILD, self.first[p as usize]);
        while at != NO_CHILD && at < k {
            (previous, at) = (at, self.next[at as usize]);
        }
        previous
    }

    /// Makes `after` point to `child` (`after` [`NO_CHILD`]: the front of `p`'s list).
    pub(super) fn link(&mut self, p: u32, after: u32, child: u32) {
        if after == NO_CHILD {
            self.first[p as usize] = child;
        } else {
            self.next[after as usize] = child;
        }
    }

    /// Puts child `k` in its place among `p`'s children.
    pub(super) fn insert(&mut self, p: u32, k: u32) {
        let after = self.before(p, k);
        self.next[k as usize] = if after == NO_CHILD {
            self.first[p as usize]
        } else {
            self.next[after as usize]
        };
        self.link(p, after, k);
    }

    pub(super) fn remove(&mut self, p: u32, k: u32) {
        let after = self.before(p, k);
        self.link(p, after, self.next[k as usize]);
        self.next[k as usize] = NO_CHILD;
    }

    /// Gives `p` all of `q`'s children and `q` all of `p`'s.
    pub(super) fn exchange(&mut self, p: u32, q: u32) {
        self.first.swap(p as usize, q as usize);
    }
}

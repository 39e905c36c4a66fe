//! Moves of whole kinds: every child of one kind placed again at once, by a least-cost
//! assignment of children to their parents' places for that kind, with every other
//! child kept where it is. Where counts are pinned, a parent's first child of a kind is
//! worth what its count distribution says, and each further one less: the assignment
//! cannot pile children up or leave parents without, as moves of one child or two can
//! when each step must gain alone.

use super::assign::{assign, Rows};
use super::model::MAX_CHILDREN;
use super::search::Assignment;
use super::{NO_LINK, STALE};

/// Places per parent for one kind of child: a parent's first, second and third.
const PLACES: usize = 3;
/// Cost of leaving a child where no place is free: far above any parent's.
const NO_PLACE: f64 = 1e9;

impl Assignment<'_> {
    /// Places the children of every kind again, a kind at a time; returns how many
    /// moved.
    pub(super) fn place_kinds(&mut self) -> usize {
        let moved = (0..self.calls.events.kinds)
            .map(|c| self.place_kind(c))
            .sum();
        // The search takes a child found settled to stay so while its own parent is
        // unchanged, since only its steps move children: placing moves them too.
        self.settled_at.fill(STALE);
        moved
    }

    /// Places every child in scope of kind `c` again at once; returns how many moved.
    pub(super) fn place_kind(&mut self, c: u32) -> usize {
        let calls = self.calls;
        let kinds = calls.events.kinds as usize;
        let width = MAX_CHILDREN + 1;
        let children: Vec<u32> = (0..self.scope.children)
            .filter(|&k| calls.kind[k as usize] == c && !self.row(k).is_empty())
            .collect();
        if children.is_empty() {
            return 0;
        }
        let before: Vec<u32> = children.iter().map(|&k| self.chosen[k as usize]).collect();
        let mut touched: Vec<u32> = Vec::new();
        for (&k, &link) in children.iter().zip(&before) {
            if link != NO_LINK {
                touched.push(self.parent_of(link));
            }
            self.reassign(k, NO_LINK);
        }
        self.rescore_each(&mut touched);
        let parents = calls.incoming.len();
        let mut rows = Rows::new();
        for (i, &k) in children.iter().enumerate() {
            for link in self.row(k) {
                let gain = self.join_gain(k, link);
                if !gain.is_finite() {
                    continue;
                }
                let p = self.parent_of(link);
                let a = calls.caller[p as usize] as usize;
                let counts = &self.count_log[(a * kinds + c as usize) * width..][..width];
                let step = |n: usize| counts[n] - counts[n - 1];
                for place in 0..PLACES {
                    let more = step(place + 1) - step(1);
                    rows.push(p * PLACES as u32 + place as u32, -(gain + more));
                }
            }
            let orphan = self.orphan_value(k);
            let stay = if orphan.is_finite() {
                -orphan
            } else {
                NO_PLACE
            };
            rows.push((parents * PLACES + i) as u32, stay);
            rows.end_row();
        }
        let placed = assign(&rows, parents * PLACES + children.len());
        let mut moved = 0;
        touched.clear();
        for ((&k, &column), &old) in children.iter().zip(&placed).zip(&before) {
            let column = column as usize;
            let link = if column < parents * PLACES {
                self.link_to(k, (column / PLACES) as u32)
                    .expect("a child placed at one of its parents")
            } else if self.orphan_value(k).is_finite() {
                NO_LINK
            } else {
                old
            };
            if link != old {
                moved += 1;
            }
            if link != NO_LINK {
                touched.push(self.parent_of(link));
            }
            self.reassign(k, link);
        }
        self.rescore_each(&mut touched);
        moved
    }

    /// Rescores each parent in `parents` once (they may repeat).
    fn rescore_each(&mut self, parents: &mut Vec<u32>) {
        parents.sort_unstable();
        parents.dedup();
        self.rescore(parents);
    }
}

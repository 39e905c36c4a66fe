//! Splitting one node's calls in two where no candidate link crosses, so that the end
//! kept after the window is carried over both halves at once, one per core: where the
//! cut falls, and the second half's candidates and start as a node of their own. Owns
//! no search and no learning.

use crate::nesting::candidates::Candidates;
use crate::nesting::parents::NO_PARENT;

/// Where a node's calls fall in two: children `..children` have candidates among
/// parents `..parents` only, and the other children among the other parents only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cut {
    pub(super) children: usize,
    pub(super) parents: u32,
}

/// The cut nearest the middle of the children that leaves at least `least` of them on
/// each side, some with a candidate after it; none where every instant between has a
/// call open across it.
pub(super) fn middle_cut(candidates: &Candidates, least: usize) -> Option<Cut> {
    let n = candidates.offsets.len().saturating_sub(1);
    // Per position, the earliest candidate of any child at or after it.
    let mut after = vec![u32::MAX; n + 1];
    for k in (0..n).rev() {
        let first = candidates.of(k).first().copied().unwrap_or(u32::MAX);
        after[k] = after[k + 1].min(first);
    }
    let least = least.max(1);
    if n / 2 < least {
        return None;
    }
    let target = n / 2;
    // One past the latest candidate of any child before the position.
    let mut before = 0u32;
    let mut best: Option<Cut> = None;
    for (m, &first_after) in after[..n].iter().enumerate() {
        if m >= least && n - m >= least && first_after != u32::MAX && before <= first_after {
            let cut = Cut {
                children: m,
                parents: first_after,
            };
            let closer = best.is_none_or(|b| m.abs_diff(target) < b.children.abs_diff(target));
            if closer {
                best = Some(cut);
            }
            if m >= target {
                break;
            }
        }
        if let Some(&last) = candidates.of(m).last() {
            before = before.max(last + 1);
        }
    }
    best
}

/// The candidates of the children past `cut`, counted from its first child and parent.
pub(super) fn after_cut(candidates: &Candidates, cut: Cut) -> Candidates {
    let base = candidates.offsets[cut.children];
    Candidates {
        offsets: candidates.offsets[cut.children..]
            .iter()
            .map(|&o| o - base)
            .collect(),
        parents: candidates.parents[base as usize..]
            .iter()
            .map(|&p| p - cut.parents)
            .collect(),
        rescued: 0,
    }
}

/// Per child past `cut`, its parent in `start` counted from the cut's first parent.
pub(super) fn start_after_cut(start: &[u32], cut: Cut) -> Vec<u32> {
    start[cut.children..]
        .iter()
        .map(|&p| if p == NO_PARENT { p } else { p - cut.parents })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(rows: &[&[u32]]) -> Candidates {
        let mut offsets = vec![0];
        let mut parents = Vec::new();
        for row in rows {
            parents.extend_from_slice(row);
            offsets.push(parents.len() as u32);
        }
        Candidates {
            offsets,
            parents,
            rescued: 0,
        }
    }

    #[test]
    fn the_cut_falls_where_no_candidate_link_crosses() {
        // Parent 1 is open across children 1 and 2; nothing crosses between 2 and 3.
        let candidates = rows(&[&[0], &[0, 1], &[1, 2], &[3], &[3, 4], &[4]]);
        assert_eq!(
            middle_cut(&candidates, 1),
            Some(Cut {
                children: 3,
                parents: 3
            })
        );
        let after = after_cut(
            &candidates,
            Cut {
                children: 3,
                parents: 3,
            },
        );
        assert_eq!(after, rows(&[&[0], &[0, 1], &[1]]));
        assert_eq!(
            start_after_cut(
                &[0, 1, 2, 3, NO_PARENT, 4],
                Cut {
                    children: 3,
                    parents: 3
                }
            ),
            vec![0, NO_PARENT, 1]
        );
    }

    #[test]
    fn no_cut_where_a_call_is_open_across_every_instant() {
        let candidates = rows(&[&[0], &[0, 1], &[1, 2], &[2, 3], &[3]]);
        assert_eq!(middle_cut(&candidates, 1), None);
        let candidates = rows(&[&[0], &[1], &[1, 2], &[2]]);
        assert_eq!(middle_cut(&candidates, 2), None);
        // Nor where the quiet instants leave fewer than `least` children on a side.
        let candidates = rows(&[&[0], &[1], &[1], &[1], &[2]]);
        assert_eq!(middle_cut(&candidates, 1).map(|c| c.children), Some(1));
        assert_eq!(middle_cut(&candidates, 2), None);
    }
}

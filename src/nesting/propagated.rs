//! Links that propagated ids make known. Where a service passes the request id or
//! trace context of the call it serves on to the calls it makes (`traceparent`,
//! `X-Request-ID`, a sqlcommenter comment), a child carrying an id has as parent the
//! candidate carrying the same one: its row of candidates shrinks to that call, and the
//! scoreboard and the joint model then learn from it as from a labelled example,
//! which helps them place the calls that carry none (a cache's). Owns deciding, per
//! node, whether its ids propagate, and narrowing the rows; reading ids is
//! [`crate::capture::protocol::propagation`]'s, the choice among what is left the
//! parent choices'.

use super::candidates::Candidates;
use crate::trace::PropagatedId;

/// What a node's propagated ids did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IdLinks {
    /// The node's calls out that carried an id.
    pub carried: u64,
    /// Of those, the ones whose candidates included exactly one call carrying the same
    /// id: their link is known.
    pub fixed: u64,
    /// Whether the node's ids were found to propagate, and so used.
    pub propagates: bool,
}

/// Whether a node's ids propagate: at least this many of the children that carry an
/// id and have candidates carrying ids must find their own among them. A node that
/// mints a new id per call (a proxy that sets `X-Request-ID` itself) finds none.
pub const PROPAGATES: f64 = 0.5;

/// Narrows each child's candidates to the call carrying its id (`ids`: per call, the id
/// it carried), where the node's ids propagate; otherwise returns `None` with what was
/// counted: of the children that `counted` keeps (a segment's core: [`crate::streaming`]), though all decide.
pub fn narrow(
    ids: &[PropagatedId],
    (incoming, outgoing): (&[u32], &[u32]),
    candidates: &Candidates,
    counted: &dyn Fn(u32) -> bool,
) -> (Option<Candidates>, IdLinks) {
    let id = |call: u32| ids[call as usize];
    let parent_id = |local: u32| id(incoming[local as usize]);
    let mut links = IdLinks::default();
    let (mut matched, mut mismatched) = (0u64, 0u64);
    for (k, &child) in outgoing.iter().enumerate() {
        let own = id(child);
        if own == PropagatedId::NONE {
            continue;
        }
        let counts = counted(child);
        links.carried += u64::from(counts);
        let row = candidates.of(k);
        let same = row.iter().filter(|&&local| parent_id(local) == own).count();
        if same > 0 {
            matched += 1;
            links.fixed += u64::from(same == 1 && counts);
        } else if row
            .iter()
            .any(|&local| parent_id(local) != PropagatedId::NONE)
        {
            mismatched += 1;
        }
    }
    if matched == 0 || (matched as f64) < PROPAGATES * (matched + mismatched) as f64 {
        links.fixed = 0;
        return (None, links);
    }
    links.propagates = true;
    let mut offsets = Vec::with_capacity(candidates.offsets.len());
    let mut parents = Vec::with_capacity(candidates.parents.len());
    offsets.push(0);
    for (k, &child) in outgoing.iter().enumerate() {
        let row = candidates.of(k);
        let own = id(child);
        let start = parents.len();
        if own != PropagatedId::NONE {
            parents.extend(row.iter().filter(|&&local| parent_id(local) == own));
            if parents.len() == start {
                // None carries its id: a call carrying another request's id is not
                // its parent; one carrying none may be.
                parents.extend(
                    row.iter()
                        .filter(|&&local| parent_id(local) == PropagatedId::NONE),
                );
            }
        }
        if parents.len() == start {
            parents.extend_from_slice(row);
        }
        offsets.push(parents.len() as u32);
    }
    (
        Some(Candidates {
            offsets,
            parents,
            rescued: candidates.rescued,
        }),
        links,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{text, Trace, TraceBuilder};
    use std::path::Path;

    /// Two requests into b overlap; each of b's calls to c carries its request's id.
    fn trace(ids: [&str; 4]) -> Trace {
        let text = format!(
            "1 CALL a b r1 id={}\n2 CALL a b r2 id={}\n3 CALL b c c1 id={}\n4 RET c b c1\n\
             5 CALL b c c2 id={}\n6 RET c b c2\n7 RET b a r1\n8 RET b a r2\n",
            ids[0], ids[1], ids[2], ids[3]
        );
        let mut builder = TraceBuilder::new();
        text::read(Path::new("t"), text.as_bytes(), &mut builder).unwrap();
        builder.finish()
    }

    fn narrowed(trace: &Trace) -> (Option<Candidates>, IdLinks) {
        let (pairs, _) = crate::nesting::call_pairs::find_call_pairs(trace);
        let incoming = [0u32, 1];
        let outgoing = [2u32, 3];
        let all = Candidates {
            offsets: vec![0, 2, 4],
            parents: vec![0, 1, 0, 1],
            rescued: 0,
        };
        let ids: Vec<PropagatedId> = (pairs.iter())
            .map(|pair| trace.propagated(pair.call_id))
            .collect();
        narrow(&ids, (&incoming, &outgoing), &all, &|_| true)
    }

    #[test]
    fn a_child_keeps_only_the_candidate_with_its_id() {
        let (rows, links) = narrowed(&trace(["x", "y", "y", "x"]));
        let rows = rows.expect("ids propagate");
        assert_eq!((rows.of(0), rows.of(1)), (&[1][..], &[0][..]));
        assert_eq!(
            links,
            IdLinks {
                carried: 2,
                fixed: 2,
                propagates: true
            }
        );
    }

    #[test]
    fn a_node_that_mints_new_ids_is_left_alone() {
        let (rows, links) = narrowed(&trace(["x", "y", "p", "q"]));
        assert!(rows.is_none());
        assert_eq!(
            (links.carried, links.fixed, links.propagates),
            (2, 0, false)
        );
    }
}

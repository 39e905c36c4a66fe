//! The hosts as a graph whose edges are fitted pairs weighted by their uncertainty:
//! the reference host (the one with the smallest sum of shortest-path uncertainties to
//! the others, by Dijkstra) and each host's path to it. Owns the choice of reference
//! and of paths; knows nothing of how a pair was fitted.

use super::fit::{PairFit, Quality};
use petgraph::graph::{NodeIndex, UnGraph};
use petgraph::visit::EdgeRef;
use std::collections::BTreeMap;

/// A host's route to the reference: the pairs to cross, from the host onwards.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Indices into the pair fits, in the order they are crossed.
    pub hops: Vec<usize>,
    /// The sum of their uncertainties, ns.
    pub distance: f64,
}

/// The reference and every host's route to it; `None` for hosts it cannot reach.
pub struct Routes {
    /// The reference host, if any host has a pair.
    pub reference: Option<usize>,
    /// Per host.
    pub routes: Vec<Option<Route>>,
}

/// Chooses the reference among `hosts` (named by `names`, for ties) and routes to it.
pub fn routes(names: &[String], fits: &[PairFit]) -> Routes {
    let mut graph: UnGraph<usize, (f64, usize)> = UnGraph::new_undirected();
    let nodes: Vec<NodeIndex> = (0..names.len()).map(|i| graph.add_node(i)).collect();
    for (index, fit) in fits.iter().enumerate() {
        if fit.quality != Quality::Absent {
            graph.add_edge(nodes[fit.a], nodes[fit.b], (fit.uncertainty(), index));
        }
    }
    let distances = |from: usize| -> BTreeMap<usize, f64> {
        petgraph::algo::dijkstra(&graph, nodes[from], None, |e| e.weight().0)
            .into_iter()
            .map(|(node, d)| (graph[node], d))
            .collect()
    };
    // Most hosts reached first, then the smallest sum, then the first name.
    let mut best: Option<(usize, f64, usize)> = None;
    for host in 0..names.len() {
        let d = distances(host);
        let reached = d.len();
        let sum: f64 = d.values().sum();
        let better = match best {
            None => true,
            Some((r, s, b)) => {
                reached > r
                    || (reached == r && sum < s)
                    || (reached == r && sum == s && names[host] < names[b])
            }
        };
        if better {
            best = Some((reached, sum, host));
        }
    }
    let Some((_, _, reference)) = best.filter(|b| b.0 > 1) else {
        return Routes {
            reference: None,
            routes: vec![None; names.len()],
        };
    };
    let from_reference = distances(reference);
    let mut routes = vec![None; names.len()];
    routes[reference] = Some(Route {
        hops: Vec::new(),
        distance: 0.0,
    });
    // Hosts in order of distance: each one's predecessor is routed already.
    let mut order: Vec<(f64, usize)> = from_reference.iter().map(|(&h, &d)| (d, h)).collect();
    order.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    // Hosts at equal distances (edges of zero uncertainty) may need a second pass.
    for _ in 0..names.len() {
        let mut progress = false;
        for &(distance, host) in &order {
            if routes[host].is_some() {
                continue;
            }
            // The neighbour on a shortest path: the one the edge reaches at this distance,
            // lowest index first.
            let mut via: Option<(f64, usize, usize)> = None;
            for edge in graph.edges(nodes[host]) {
                let (weight, fit) = *edge.weight();
                let other = if edge.source() == nodes[host] {
                    graph[edge.target()]
                } else {
                    graph[edge.source()]
                };
                let Some(d) = from_reference.get(&other) else {
                    continue;
                };
                let total = d + weight;
                // Only through hosts routed already, so routes never loop.
                if routes[other].is_none() {
                    continue;
                }
                let closer = match via {
                    None => true,
                    Some((t, o, _)) => total < t || (total == t && other < o),
                };
                if closer {
                    via = Some((total, other, fit));
                }
            }
            let Some((_, other, fit)) = via else { continue };
            let Some(onward) = routes[other].clone() else {
                continue;
            };
            let mut hops = vec![fit];
            hops.extend(onward.hops);
            routes[host] = Some(Route { hops, distance });
            progress = true;
        }
        if !progress {
            break;
        }
    }
    Routes {
        reference: Some(reference),
        routes,
    }
}

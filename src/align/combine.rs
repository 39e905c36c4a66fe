//! All pairs at once: where the graph of hosts has loops, every host's correction is
//! solved by weighted least squares over every accurate pair (weight: one over the
//! square of the pair's half-width), at instants evenly spread over the trace, instead
//! of along one shortest path. Each solution is kept within the bounds of the host's
//! shortest-path route, which hold the truth, so it can only come closer to it. Owns
//! the grid and the solve; the routes and fits come from its callers.

use super::fit::{PairFit, Quality};
use super::Alignment;
use crate::trace::Nanos;

/// A host's correction (reference clock minus its own) at instants of its own clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Instants in the host's clock, increasing.
    pub times: Vec<Nanos>,
    /// The correction at each, ns.
    pub corrections: Vec<f64>,
}

impl Grid {
    /// The correction at `t`, by linear interpolation (`None` outside the grid).
    pub fn at(&self, t: Nanos) -> Option<f64> {
        let i = self.times.partition_point(|&x| x <= t);
        if i == 0 || i == self.times.len() {
            return (self.times.last() == Some(&t)).then(|| *self.corrections.last().unwrap());
        }
        let (t0, t1) = (self.times[i - 1], self.times[i]);
        let (c0, c1) = (self.corrections[i - 1], self.corrections[i]);
        Some(c0 + (c1 - c0) * (t - t0) as f64 / (t1 - t0) as f64)
    }
}

/// Most instants solved over a trace.
const MOST_INSTANTS: usize = 2048;
/// Instants are at least this far apart, ns.
const LEAST_SPACING: Nanos = 1_000_000_000;

/// Solves the corrections of `hosts` (each with its span in its own clock, `None` when
/// it is not aligned) for the reference `reference`. Returns one grid per host, `None`
/// where the tree's answer stands (the reference, hosts outside loops' reach).
pub fn least_squares(
    tree: &Alignment,
    spans: &[Option<(Nanos, Nanos)>],
    reference: usize,
) -> Vec<Option<Grid>> {
    let hosts = spans.len();
    let edges: Vec<&PairFit> = tree
        .fits
        .iter()
        .filter(|f| f.quality == Quality::Accurate && spans[f.a].is_some() && spans[f.b].is_some())
        .collect();
    // Unknowns: every aligned host but the reference that an accurate pair reaches.
    let mut index = vec![None; hosts];
    let mut unknowns = Vec::new();
    for host in 0..hosts {
        let touched = edges.iter().any(|f| f.a == host || f.b == host);
        if host != reference && spans[host].is_some() && touched {
            index[host] = Some(unknowns.len());
            unknowns.push(host);
        }
    }
    let routed_edges = unknowns.len();
    if unknowns.is_empty() || edges.len() <= routed_edges {
        // A tree: nothing to combine.
        return vec![None; hosts];
    }
    // Instants in the reference's clock over the union of the hosts' spans.
    let Some((first, last)) = spans
        .iter()
        .enumerate()
        .filter_map(|(h, s)| s.map(|(a, b)| (tree_time(tree, h, a), tree_time(tree, h, b))))
        .reduce(|x, y| (x.0.min(y.0), x.1.max(y.1)))
    else {
        return vec![None; hosts];
    };
    let steps = (((last - first) / LEAST_SPACING) as usize).clamp(1, MOST_INSTANTS);
    let mut grids: Vec<Grid> = vec![
        Grid {
            times: Vec::new(),
            corrections: Vec::new()
        };
        hosts
    ];
    let n = unknowns.len();
    for k in 0..=steps {
        let at = first + ((last - first) as i128 * k as i128 / steps as i128) as Nanos;
        // Each host's own time for the instant, by the tree.
        let local: Vec<Nanos> = (0..hosts).map(|h| host_time(tree, h, at)).collect();
        let mut matrix = vec![vec![0.0; n]; n];
        let mut rhs = vec![0.0; n];
        for f in &edges {
            let t = local[f.a];
            // b's clock minus a's: the correction of a minus that of b.
            let offset = f.offset_at(t);
            let half = f
                .bounds_at(t)
                .map(|(low, high)| (high - low) / 2.0)
                .unwrap_or_else(|| f.uncertainty());
            let weight = 1.0 / half.max(1.0).powi(2);
            // Residual: y_a − y_b − offset, with y_reference = 0.
            match (index[f.a], index[f.b]) {
                (Some(i), Some(j)) => {
                    matrix[i][i] += weight;
                    matrix[j][j] += weight;
                    matrix[i][j] -= weight;
                    matrix[j][i] -= weight;
                    rhs[i] += weight * offset;
                    rhs[j] -= weight * offset;
                }
                (Some(i), None) => {
                    matrix[i][i] += weight;
                    rhs[i] += weight * offset;
                }
                (None, Some(j)) => {
                    matrix[j][j] += weight;
                    rhs[j] -= weight * offset;
                }
                (None, None) => {}
            }
        }
        let Some(solution) = solve(matrix, rhs) else {
            return vec![None; hosts];
        };
        for (u, &host) in unknowns.iter().enumerate() {
            let t = local[host];
            let routed = tree.route_correction(host, t);
            let mut y = solution[u];
            if let Some(bound) = tree.route_bound(host, t) {
                y = y.clamp(routed - bound, routed + bound);
            }
            grids[host].times.push(t);
            grids[host].corrections.push(y);
        }
    }
    (0..hosts)
        .map(|h| {
            let grid = std::mem::take(&mut grids[h].times);
            (index[h].is_some() && grid.windows(2).all(|w| w[0] < w[1])).then(|| Grid {
                times: grid,
                corrections: std::mem::take(&mut grids[h].corrections),
            })
        })
        .collect()
}

/// A host's time in the reference clock, by the tree.
fn tree_time(tree: &Alignment, host: usize, t: Nanos) -> Nanos {
    t + tree.route_correction(host, t).round() as Nanos
}

/// The host's time whose reference time is `at`, by the tree (fixed point: the
/// correction changes by nanoseconds over the seconds it moves a time).
fn host_time(tree: &Alignment, host: usize, at: Nanos) -> Nanos {
    let mut t = at - tree.route_correction(host, at).round() as Nanos;
    for _ in 0..2 {
        t = at - tree.route_correction(host, t).round() as Nanos;
    }
    t
}

/// Gaussian elimination with partial pivoting; `None` for a singular system.
fn solve(mut matrix: Vec<Vec<f64>>, mut rhs: Vec<f64>) -> Option<Vec<f64>> {
    let n = rhs.len();
    for col in 0..n {
        let pivot =
            (col..n).max_by(|&x, &y| matrix[x][col].abs().total_cmp(&matrix[y][col].abs()))?;
        if matrix[pivot][col].abs() < 1e-300 {
            return None;
        }
        matrix.swap(col, pivot);
        rhs.swap(col, pivot);
        for row in col + 1..n {
            let factor = matrix[row][col] / matrix[col][col];
            if factor == 0.0 {
                continue;
            }
            let (above, below) = matrix.split_at_mut(row);
            for (target, &value) in below[0][col..].iter_mut().zip(&above[col][col..]) {
                *target -= factor * value;
            }
            rhs[row] -= factor * rhs[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let sum: f64 = (row + 1..n).map(|c| matrix[row][c] * x[c]).sum();
        x[row] = (rhs[row] - sum) / matrix[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_system_solves() {
        let x = solve(vec![vec![2.0, -1.0], vec![-1.0, 2.0]], vec![1.0, 1.0]).unwrap();
        assert!((x[0] - 1.0).abs() < 1e-12 && (x[1] - 1.0).abs() < 1e-12);
        assert!(solve(vec![vec![1.0, 1.0], vec![1.0, 1.0]], vec![1.0, 2.0]).is_none());
    }

    #[test]
    fn a_grid_interpolates_inside_and_declines_outside() {
        let grid = Grid {
            times: vec![0, 10],
            corrections: vec![5.0, 15.0],
        };
        assert_eq!(grid.at(5), Some(10.0));
        assert_eq!(grid.at(10), Some(15.0));
        assert_eq!(grid.at(11), None);
        assert_eq!(grid.at(-1), None);
    }
}

//! A sparse minimum-cost assignment: each row takes one of its columns, no column is
//! taken twice, and the sum of the costs is least. Shortest augmenting paths with
//! column prices (Jonker and Volgenant's method on sparse rows, as Crouse describes it
//! in "On implementing 2D rectangular assignment algorithms", 2016), each row added in
//! turn by Dijkstra's search over the rows already placed. Rows must have a column to
//! themselves among theirs (a fallback column no other row has) so that every row can
//! be placed. Knows nothing of calls: the joint choice's moves of whole kinds build the
//! rows.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// "No row" or "no column".
const NONE: u32 = u32::MAX;

/// Rows as lists of (column, cost).
pub(super) struct Rows {
    /// Where each row's columns start in `columns` and `costs`; one more than rows.
    pub(super) offsets: Vec<u32>,
    pub(super) columns: Vec<u32>,
    pub(super) costs: Vec<f64>,
}

impl Rows {
    pub(super) fn new() -> Self {
        Rows {
            offsets: vec![0],
            columns: Vec::new(),
            costs: Vec::new(),
        }
    }

    /// Ends the row whose columns were pushed since the last.
    pub(super) fn end_row(&mut self) {
        self.offsets.push(self.columns.len() as u32);
    }

    pub(super) fn push(&mut self, column: u32, cost: f64) {
        self.columns.push(column);
        self.costs.push(cost);
    }

    fn of(&self, row: usize) -> std::ops::Range<usize> {
        self.offsets[row] as usize..self.offsets[row + 1] as usize
    }

    fn count(&self) -> usize {
        self.offsets.len() - 1
    }
}

#[derive(PartialEq)]
struct Reached(f64, u32);

impl Eq for Reached {}

impl PartialOrd for Reached {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Reached {
    // Least distance first from Rust's max-heap; ties by column, for determinism.
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

/// The column of each row in a least-cost assignment of `rows` to `columns` columns.
/// Every cost must be finite.
pub(super) fn assign(rows: &Rows, columns: usize) -> Vec<u32> {
    let n = rows.count();
    let mut price = vec![0.0f64; columns];
    let mut row_of = vec![NONE; columns];
    let mut column_of = vec![NONE; n];
    let mut distance = vec![f64::INFINITY; columns];
    let mut before = vec![NONE; columns];
    let mut done = vec![false; columns];
    let mut touched: Vec<u32> = Vec::new();
    let mut finished: Vec<u32> = Vec::new();
    let mut heap = BinaryHeap::new();
    for start in 0..n {
        // Dijkstra from `start` over columns: a row placed on a column reached goes on
        // to its other columns at their reduced costs, which the prices keep >= 0.
        for j in rows.of(start) {
            let column = rows.columns[j];
            let d = rows.costs[j] - price[column as usize];
            if d < distance[column as usize] {
                if distance[column as usize] == f64::INFINITY {
                    touched.push(column);
                }
                distance[column as usize] = d;
                before[column as usize] = start as u32;
                heap.push(Reached(d, column));
            }
        }
        let sink = loop {
            let Some(Reached(d, column)) = heap.pop() else {
                break NONE;
            };
            let c = column as usize;
            if done[c] || d > distance[c] {
                continue;
            }
            done[c] = true;
            finished.push(column);
            let row = row_of[c];
            if row == NONE {
                break column;
            }
            // The row's own reduced cost on its column is 0: its dual is cost - price.
            let own = rows
                .of(row as usize)
                .find(|&j| rows.columns[j] == column)
                .map(|j| rows.costs[j])
                .expect("a placed row has its column");
            let dual = own - price[c];
            for j in rows.of(row as usize) {
                let next = rows.columns[j] as usize;
                if done[next] {
                    continue;
                }
                let nd = d + rows.costs[j] - price[next] - dual;
                if nd < distance[next] {
                    if distance[next] == f64::INFINITY {
                        touched.push(next as u32);
                    }
                    distance[next] = nd;
                    before[next] = row;
                    heap.push(Reached(nd, next as u32));
                }
            }
        };
        heap.clear();
        if sink != NONE {
            let reach = distance[sink as usize];
            for &column in &finished {
                let c = column as usize;
                price[c] += distance[c] - reach;
            }
            // Augment: each row on the path moves to the column it reached.
            let mut column = sink;
            loop {
                let row = before[column as usize];
                let previous = column_of[row as usize];
                column_of[row as usize] = column;
                row_of[column as usize] = row;
                if row as usize == start {
                    break;
                }
                column = previous;
            }
        }
        for &column in &touched {
            let c = column as usize;
            distance[c] = f64::INFINITY;
            done[c] = false;
            before[c] = NONE;
        }
        touched.clear();
        finished.clear();
    }
    column_of
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(costs: &[Vec<Option<f64>>], columns: usize) -> f64 {
        fn go(costs: &[Vec<Option<f64>>], row: usize, used: &mut Vec<bool>) -> f64 {
            if row == costs.len() {
                return 0.0;
            }
            let mut best = f64::INFINITY;
            for (j, c) in costs[row].iter().enumerate() {
                if let Some(c) = c {
                    if !used[j] {
                        used[j] = true;
                        best = best.min(c + go(costs, row + 1, used));
                        used[j] = false;
                    }
                }
            }
            best
        }
        go(costs, 0, &mut vec![false; columns])
    }

    #[test]
    fn assignments_of_small_random_problems_cost_what_trying_every_one_costs() {
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as f64 / (1u64 << 31) as f64
        };
        for _ in 0..300 {
            let n = 1 + (next() * 6.0) as usize;
            let shared = 1 + (next() * 6.0) as usize;
            // Each row: some shared columns, and a fallback column of its own.
            let columns = shared + n;
            let mut dense = vec![vec![None; columns]; n];
            let mut rows = Rows::new();
            for (r, dense) in dense.iter_mut().enumerate() {
                for (j, slot) in dense.iter_mut().enumerate().take(shared) {
                    if next() < 0.6 {
                        let c = (next() * 20.0 - 10.0).round();
                        *slot = Some(c);
                        rows.push(j as u32, c);
                    }
                }
                let fallback = 50.0;
                dense[shared + r] = Some(fallback);
                rows.push((shared + r) as u32, fallback);
                rows.end_row();
            }
            let chosen = assign(&rows, columns);
            let mut used = vec![false; columns];
            let mut total = 0.0;
            for (r, &c) in chosen.iter().enumerate() {
                assert!(!used[c as usize], "a column taken twice");
                used[c as usize] = true;
                total += dense[r][c as usize].expect("a row placed on one of its columns");
            }
            assert_eq!(total, brute(&dense, columns));
        }
    }
}

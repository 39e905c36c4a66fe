//! The shop captures that ship in `traces/shop/`, for tests that run on a real system.

use std::path::Path;

/// Paths of the shop's captures (one per host), sorted.
pub fn shop_captures() -> Vec<String> {
    let shop = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/shop");
    let mut captures: Vec<String> = std::fs::read_dir(&shop)
        .expect("traces/shop ships with the project")
        .map(|e| e.expect("readable directory").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .map(|p| p.to_str().expect("UTF-8 path").to_owned())
        .collect();
    captures.sort();
    captures
}

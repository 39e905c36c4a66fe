//! What `blackbox collect` reads from its hosts (a pcap stream, their standard error's
//! lines) and from disk (a manifest, a cluster's snapshot): none may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::collected(data);
});

//! Segments of several captures, with addresses, ports and numbers that meet often,
//! through the pairing across address translation and the learning of translations:
//! none may panic, and a match is on one link at most.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::nat_pairing(data);
});

//! Arbitrary bytes through the input sniffer and the gzip layer: none may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::source(data);
});

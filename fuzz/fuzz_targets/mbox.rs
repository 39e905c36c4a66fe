//! Arbitrary bytes through the mbox reader and the trace writer: none may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::mbox(data);
});

//! Arbitrary bytes through the text trace reader and, when they parse, the nesting
//! algorithm and every report: none may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::text_trace(data);
});

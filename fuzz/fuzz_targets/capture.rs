//! Arbitrary bytes through the capture reader, packet decoding, flows, framing and
//! nesting: none may panic or loop forever.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::capture(data);
});

//! Arbitrary conversations through every protocol's framer (TCP and UDP): none may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::protocols(data);
});

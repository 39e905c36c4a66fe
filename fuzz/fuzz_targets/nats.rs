//! Conversations through the nats framer, every byte value possible: none may panic.
#![no_main]

use blackbox::capture::protocol::ProtocolName;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::framer(ProtocolName::Nats, data);
});

//! Conversations through the http2 framer, every byte value possible: none may panic.
#![no_main]

use blackbox::capture::protocol::ProtocolName;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::framer(ProtocolName::Http2, data);
});

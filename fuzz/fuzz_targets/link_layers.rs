//! One frame of every link layer blackbox reads (Ethernet, raw IP, Linux cooked capture
//! v1 and v2, BSD loopback), bare or inside VXLAN or Geneve: decoding may not panic,
//! and the fast reading of plain Ethernet, IPv4 and TCP frames must agree with the
//! general one.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    blackbox::fuzzing::link_layers(data);
});

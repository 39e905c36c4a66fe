//! The fuzz target's body on generated input, so that every `cargo test` runs it: no
//! input, however malformed, may panic the reader, the algorithm or a report.

use proptest::prelude::*;

/// Lines that are nearly valid, so that generated input reaches the algorithm.
fn trace_line() -> impl Strategy<Value = String> {
    let op = prop::sample::select(vec![
        "CALL",
        "RET",
        "CALL_SENT",
        "CALL_RECV",
        "RET_SENT",
        "RET_RECV",
        "MSG",
        "MSG_RECV",
        "BOGUS",
    ]);
    let node = prop::sample::select(vec!["a", "b", "c", "d", "a(", "-"]);
    let id = prop::sample::select(vec!["1", "2", "3", "-"]);
    let time = prop_oneof![(0u64..50).prop_map(|t| t.to_string()), "[0-9.:-]{0,12}"];
    (
        time,
        op,
        node.clone(),
        node,
        id,
        prop::option::of("[a-z]{1,3}"),
    )
        .prop_map(|(t, op, from, to, id, truth)| {
            format!("{t} {op} {from} {to} {id} {}\n", truth.unwrap_or_default())
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        blackbox::fuzzing::text_trace(&data);
    }

    #[test]
    fn arbitrary_mboxes_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        blackbox::fuzzing::mbox(&data);
    }

    #[test]
    fn nearly_valid_mboxes_never_panic(lines in prop::collection::vec(prop_oneof![
        Just("From a@b Tue Mar 11 10:00:00 2003".to_string()),
        Just(String::new()),
        "Received: (from|by|with) [a-z.]{0,8} (by|from) [a-z.()]{0,8}; [A-Za-z0-9 ,:+-]{0,30}",
        "\t[a-z ;:0-9]{0,20}",
    ], 0..40)) {
        blackbox::fuzzing::mbox(lines.join("\n").as_bytes());
    }

    #[test]
    fn nearly_valid_traces_never_panic(lines in prop::collection::vec(trace_line(), 0..60)) {
        blackbox::fuzzing::text_trace(lines.concat().as_bytes());
    }
}

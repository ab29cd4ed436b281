//! `cargo fuzz run transcript`: the body is [`capstan::fuzz::transcript`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(finding) = capstan::fuzz::transcript(data) {
        panic!("{finding}");
    }
});

//! `cargo fuzz run config`: the body is [`capstan::fuzz::config`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(finding) = capstan::fuzz::config(data) {
        panic!("{finding}");
    }
});

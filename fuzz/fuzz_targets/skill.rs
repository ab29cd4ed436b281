//! `cargo fuzz run skill`: the body is [`capstan::fuzz::skill`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(finding) = capstan::fuzz::skill(data) {
        panic!("{finding}");
    }
});

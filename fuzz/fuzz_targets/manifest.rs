//! `cargo fuzz run manifest`: the body is [`capstan::fuzz::manifest`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(finding) = capstan::fuzz::manifest(data) {
        panic!("{finding}");
    }
});

//! `cargo fuzz run package`: the body is [`capstan::fuzz::package`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(finding) = capstan::fuzz::package(data) {
        panic!("{finding}");
    }
});

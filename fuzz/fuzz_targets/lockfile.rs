//! `cargo fuzz run lockfile`: the body is [`capstan::fuzz::lockfile`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(finding) = capstan::fuzz::lockfile(data) {
        panic!("{finding}");
    }
});

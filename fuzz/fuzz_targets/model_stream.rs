//! `cargo fuzz run model_stream`: the body is [`capstan::fuzz::model_stream`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(finding) = capstan::fuzz::model_stream(data) {
        panic!("{finding}");
    }
});

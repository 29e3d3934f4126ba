#![no_main]

use libfuzzer_sys::fuzz_target;

// `encode` and the size constants are for the replay test and the corpus writer.
#[allow(dead_code)]
#[path = "../src/store_open.rs"]
mod store_open;

fuzz_target!(|data: &[u8]| {
    store_open::check(data);
});

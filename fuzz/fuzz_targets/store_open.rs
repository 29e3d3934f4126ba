#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../src/store_open.rs"]
mod store_open;

fuzz_target!(|data: &[u8]| {
    store_open::check(data);
});

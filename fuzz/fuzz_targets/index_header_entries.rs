#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rocketstore_format_fuzz::index_header_entries_check(data);
});

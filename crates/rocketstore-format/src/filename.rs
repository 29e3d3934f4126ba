//! Segment file names: the 20-digit, zero-padded decimal start offset (spec §2).

/// Number of digits in a segment file name.
pub const FILE_NAME_LEN: usize = 20;

/// `UtilAll.offset2FileName`: `offset` as a 20-digit, zero-padded decimal.
///
/// `offset_to_file_name(1073741824) == "00000000001073741824"`.
pub fn offset_to_file_name(offset: u64) -> String {
    format!("{offset:020}")
}

/// Parses a segment file name: exactly 20 ASCII digits (no sign, no whitespace, no suffix such as
/// `.delete`). Returns `None` for anything else, and for values above `i64::MAX`: RocketMQ parses
/// names with `Long.parseLong`, and commit-log offsets are `i64` on disk.
pub fn parse_file_name(name: &str) -> Option<u64> {
    let bytes = name.as_bytes();
    if bytes.len() != FILE_NAME_LEN || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &b in bytes {
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if v > i64::MAX as u64 {
        return None;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_2_file_names() {
        assert_eq!(offset_to_file_name(0), "00000000000000000000");
        assert_eq!(offset_to_file_name(1_073_741_824), "00000000001073741824");
        assert_eq!(offset_to_file_name(2_147_483_648), "00000000002147483648");
        assert_eq!(offset_to_file_name(6_000_000), "00000000000006000000");
    }

    #[test]
    fn parse() {
        assert_eq!(parse_file_name("00000000001073741824"), Some(1_073_741_824));
        assert_eq!(parse_file_name("00000000000000000000"), Some(0));
        assert_eq!(
            parse_file_name("09223372036854775807"),
            Some(i64::MAX as u64)
        );
        assert_eq!(parse_file_name("09223372036854775808"), None);
        assert_eq!(parse_file_name("99999999999999999999"), None);
        assert_eq!(parse_file_name("0000000000107374182"), None);
        assert_eq!(parse_file_name("000000000001073741824"), None);
        assert_eq!(parse_file_name("00000000001073741824.delete"), None);
        assert_eq!(parse_file_name("+0000000001073741824"), None);
        assert_eq!(parse_file_name(" 0000000001073741824"), None);
        assert_eq!(parse_file_name("０0000000001073741824"), None);
        assert_eq!(parse_file_name(""), None);
    }
}

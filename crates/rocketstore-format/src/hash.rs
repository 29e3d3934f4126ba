//! Java `String.hashCode`, RocketMQ's masked CRC-32, CQ tagsCode and the index key hash (spec §0,
//! §5.2, §6.2).

/// Java `String.hashCode()`: `h = 31*h + c` over the UTF-16 code units of `s`, with 32-bit
/// wrap-around. Supplementary characters count as two surrogate units.
pub fn java_string_hash(s: &str) -> i32 {
    java_string_hash_continue(0, s)
}

/// Continues a Java `String.hashCode()` whose first characters hashed to `h` over the
/// characters of `s`: `java_string_hash_continue(java_string_hash(a), b)` is the hash of `a`
/// followed by `b`, without building the joined string. ASCII bytes are their own UTF-16 code
/// units, so ASCII input is hashed straight from the bytes, eight at a time: the hash is linear
/// modulo 2^32, so `h` after eight units is `h * 31^8 + c0 * 31^7 + ... + c7`, whose eight
/// products do not wait on each other. The first non-ASCII byte switches to UTF-16 units.
pub fn java_string_hash_continue(h: i32, s: &str) -> i32 {
    let mut h = h;
    let mut rest = s.as_bytes();
    while let Some((c, tail)) = rest.split_first_chunk::<8>() {
        let [c0, c1, c2, c3, c4, c5, c6, c7] = c.map(i32::from);
        if (c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7) & 0x80 != 0 {
            break;
        }
        let hi = c0
            .wrapping_mul(P7)
            .wrapping_add(c1.wrapping_mul(P6))
            .wrapping_add(c2.wrapping_mul(P5))
            .wrapping_add(c3.wrapping_mul(P4));
        let lo = c4
            .wrapping_mul(P3)
            .wrapping_add(c5.wrapping_mul(P2))
            .wrapping_add(c6.wrapping_mul(31))
            .wrapping_add(c7);
        h = h.wrapping_mul(P8).wrapping_add(hi).wrapping_add(lo);
        rest = tail;
    }
    if rest.is_ascii() {
        return rest
            .iter()
            .fold(h, |h, &c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    }
    // `rest` follows only ASCII bytes, so it starts on a character boundary.
    let done = s.len() - rest.len();
    s.get(done..)
        .unwrap_or("")
        .encode_utf16()
        .fold(h, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

// Powers of 31 with 32-bit wrap-around.
const P2: i32 = 31i32.wrapping_mul(31);
const P3: i32 = P2.wrapping_mul(31);
const P4: i32 = P3.wrapping_mul(31);
const P5: i32 = P4.wrapping_mul(31);
const P6: i32 = P5.wrapping_mul(31);
const P7: i32 = P6.wrapping_mul(31);
const P8: i32 = P7.wrapping_mul(31);

/// RocketMQ `UtilAll.crc32`: standard CRC-32 (IEEE, same as zlib) masked with `0x7FFFFFFF`,
/// so the result is always `>= 0`. The CRC of an empty slice is 0.
pub fn crc32_masked(data: &[u8]) -> i32 {
    if data.is_empty() {
        return 0;
    }
    // The mask clears the top bit, so the value always fits in a non-negative i32.
    i32::try_from(crc32fast::hash(data) & 0x7FFF_FFFF).unwrap_or(0)
}

/// CQ tagsCode of a `TAGS` value (§5.2): the Java hash sign-extended to 64 bits; `None` or an empty
/// string gives 0.
pub fn tags_code(tags: Option<&str>) -> i64 {
    match tags {
        Some(t) if !t.is_empty() => i64::from(java_string_hash(t)),
        _ => 0,
    }
}

/// `IndexFile.indexKeyHashMethod` (§6.2): `abs(key.hashCode())`, and 0 if that is still negative
/// (only for `Integer.MIN_VALUE`). Always `>= 0`.
pub fn index_key_hash(key: &str) -> i32 {
    non_negative_abs(java_string_hash(key))
}

/// [`index_key_hash`] of the index key `"{topic}#{key}"` (§6.2), hashed in place: the same
/// value, with no string built.
pub fn index_key_hash_of(topic: &str, key: &str) -> i32 {
    let h = java_string_hash_continue(java_string_hash_continue(0, topic), "#");
    non_negative_abs(java_string_hash_continue(h, key))
}

fn non_negative_abs(h: i32) -> i32 {
    let h = h.wrapping_abs();
    if h < 0 {
        0
    } else {
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_in_place_matches_the_joined_key() {
        for (t, k) in [
            ("T", "k"),
            ("TopicTest", "ORDER-1234567890"),
            ("", ""),
            ("t\u{e9}", "\u{1F600}key"),
            ("BenchTopic", "7F000001000018B4AAC2A1B2C3D40000"),
        ] {
            let joined = format!("{t}#{k}");
            assert_eq!(index_key_hash_of(t, k), index_key_hash(&joined), "{joined}");
            assert_eq!(
                java_string_hash_continue(java_string_hash(t), k),
                java_string_hash(&format!("{t}{k}"))
            );
        }
    }

    #[test]
    fn chunked_hash_matches_unit_by_unit() {
        fn reference(h: i32, s: &str) -> i32 {
            s.encode_utf16()
                .fold(h, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
        }
        let long = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!~";
        for start in [0, -7, 123_456_789, i32::MIN, i32::MAX] {
            for n in 0..long.len() {
                let s = &long[..n];
                assert_eq!(
                    java_string_hash_continue(start, s),
                    reference(start, s),
                    "{s}"
                );
                for mixed in [
                    format!("{s}\u{e9}{s}"),
                    format!("\u{1F600}{s}"),
                    format!("{s}\u{4e2d}"),
                ] {
                    assert_eq!(
                        java_string_hash_continue(start, &mixed),
                        reference(start, &mixed),
                        "{mixed}"
                    );
                }
            }
        }
    }

    #[test]
    fn java_hash_basics() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // Supplementary character: two surrogate units (0xD83D, 0xDE00).
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn vector_4_tags_code() {
        assert_eq!(tags_code(Some("TagA")), 2_598_919);
        assert_eq!(tags_code(Some("TagA")), 0x27A807);
        assert_eq!(
            tags_code(Some("TagA")).to_be_bytes(),
            [0, 0, 0, 0, 0, 0x27, 0xA8, 0x07]
        );
        assert_eq!(tags_code(Some("TagB")), 2_598_920);
        assert_eq!(tags_code(Some("OrderPaid")), 1_612_261_146);
        assert_eq!(tags_code(Some("TAG-中文")), -1_827_284_947);
        assert_eq!(
            tags_code(Some("TAG-中文")).to_be_bytes(),
            [0xFF, 0xFF, 0xFF, 0xFF, 0x93, 0x15, 0xD8, 0x2D]
        );
        assert_eq!(tags_code(None), 0);
        assert_eq!(tags_code(Some("")), 0);
    }

    #[test]
    fn vector_5_crc() {
        assert_eq!(crc32_masked(b"123456789"), 1_274_296_614);
        assert_eq!(crc32_masked(b"123456789"), 0x4BF4_3926);
        assert_eq!(crc32_masked(b"hi"), 0x5893_2AAC);
        assert_eq!(crc32_masked(b"Hello RocketMQ"), 1_774_740_973);
        assert_eq!(crc32_masked(b""), 0);
    }

    #[test]
    fn vector_14_index_key_hash() {
        assert_eq!(java_string_hash("TopicTest#OrderID001"), -1_231_272_886);
        assert_eq!(index_key_hash("TopicTest#OrderID001"), 1_231_272_886);
        assert_eq!(
            index_key_hash("TopicTest#OrderID001").to_be_bytes(),
            [0x49, 0x63, 0xBB, 0xB6]
        );
        assert_eq!(java_string_hash("TopicTest#ogaQmc"), i32::MIN);
        assert_eq!(index_key_hash("TopicTest#ogaQmc"), 0);
    }
}

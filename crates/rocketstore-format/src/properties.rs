//! The properties string of a record (spec §3.5): `name \x01 value \x02` per pair, UTF-8.
//!
//! * [`encode_properties`] writes pairs in the order given.
//! * [`parse_properties`] copies RocketMQ's `MessageDecoder.string2messageProperties` exactly,
//!   including last-wins for repeated keys and silently dropping pairs with an empty name or value.
//! * [`java_hashmap_order`] reproduces the iteration order of a `java.util.HashMap`, which is the
//!   order in which the broker re-serializes properties (needed only for byte-identical output).

use std::borrow::Cow;

use crate::consts::{property, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};
use crate::error::{FieldError, FieldErrorReason};
use crate::hash::java_string_hash;

/// Appends `name \x01 value \x02` for every pair to `out`. Does not validate; see
/// [`validate_property`].
pub fn encode_properties<'a, I>(pairs: I, out: &mut Vec<u8>)
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    for (name, value) in pairs {
        out.extend_from_slice(name.as_bytes());
        out.push(NAME_VALUE_SEPARATOR);
        out.extend_from_slice(value.as_bytes());
        out.push(PROPERTY_SEPARATOR);
    }
}

/// The number of bytes [`encode_properties`] would append for `pairs` (saturating).
pub fn encoded_properties_len<'a, I>(pairs: I) -> usize
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    pairs.into_iter().fold(0usize, |acc, (n, v)| {
        acc.saturating_add(n.len())
            .saturating_add(v.len())
            .saturating_add(2)
    })
}

/// Checks one property pair: the name and the value are non-empty and contain none of `\x00`,
/// `\x01`, `\x02` (empty values would be dropped by every reader; the control characters would
/// corrupt the string).
///
/// # Errors
/// [`FieldError`] with field `"property name"` or `"property value"`.
pub fn validate_property(name: &str, value: &str) -> Result<(), FieldError> {
    check_component("property name", name)?;
    check_component("property value", value)
}

fn check_component(field: &'static str, s: &str) -> Result<(), FieldError> {
    if s.is_empty() {
        return Err(FieldError::new(field, FieldErrorReason::Empty));
    }
    if let Some((index, ch)) = s
        .char_indices()
        .find(|&(_, c)| matches!(c, '\u{0}' | '\u{1}' | '\u{2}'))
    {
        return Err(FieldError::new(
            field,
            FieldErrorReason::IllegalChar { ch, index },
        ));
    }
    Ok(())
}

/// Parsed properties: unique keys in the order of their **first** occurrence, each with the value
/// of its **last** occurrence (Java `HashMap.put` semantics without Java's iteration order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Properties(Vec<(String, String)>);

impl Properties {
    /// An empty map.
    pub fn new() -> Self {
        Properties(Vec::new())
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// Iterates over `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of (unique) keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pairs, consuming the map.
    pub fn into_vec(self) -> Vec<(String, String)> {
        self.0
    }

    /// Sets `key` to `value`: replaces the value in place if the key exists (returning the old
    /// value), otherwise appends the pair.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) -> Option<String> {
        let key = key.into();
        let value = value.into();
        if let Some(slot) = self.0.iter_mut().find(|(k, _)| *k == key) {
            return Some(std::mem::replace(&mut slot.1, value));
        }
        self.0.push((key, value));
        None
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let pos = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(pos).1)
    }

    /// The tokens of `KEYS` split on a single space, empty tokens skipped (Java
    /// `split(" ")` as used by `IndexService.buildIndex`). Empty if `KEYS` is absent.
    pub fn keys_list(&self) -> Vec<&str> {
        self.get(property::KEYS)
            .map(|k| {
                k.split(property::KEY_SEPARATOR)
                    .filter(|t| !t.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The `TAGS` value.
    pub fn tags(&self) -> Option<&str> {
        self.get(property::TAGS)
    }

    /// The `UNIQ_KEY` value.
    pub fn uniq_key(&self) -> Option<&str> {
        self.get(property::UNIQ_KEY)
    }

    /// Appends the encoded form (pairs in map order) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_properties(self.iter(), out);
    }

    /// The encoded length (pairs in map order).
    pub fn encoded_len(&self) -> usize {
        encoded_properties_len(self.iter())
    }

    /// The encoded bytes (pairs in map order).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode(&mut out);
        out
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Properties {
    /// Builds a map with [`Properties::insert`] semantics (later duplicates win).
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        let mut p = Properties::new();
        for (k, v) in iter {
            p.insert(k, v);
        }
        p
    }
}

/// RocketMQ `string2messageProperties`, exactly: decode the bytes as UTF-8 (lossy: invalid
/// sequences become U+FFFD, like Java's decoder), split on `\x02`, and keep a segment only if its
/// first `\x01` is neither at the segment start nor at its last position (non-empty name and value).
/// The name is the text before the first `\x01`; the value is the rest and may contain `\x01`.
/// A repeated key keeps its first position and takes the last value. Never fails.
pub fn parse_properties(bytes: &[u8]) -> Properties {
    let text: Cow<'_, str> = String::from_utf8_lossy(bytes);
    let mut props = Properties::new();
    for segment in text.split(char::from(PROPERTY_SEPARATOR)) {
        if let Some((name, value)) = segment.split_once(char::from(NAME_VALUE_SEPARATOR)) {
            if !name.is_empty() && !value.is_empty() {
                props.insert(name, value);
            }
        }
    }
    props
}

/// [`parse_properties`] without copying: the pairs of `bytes` borrowed from it, into `out`
/// (cleared first), with the same rules (first position, last value, pairs with an empty name
/// or value dropped). Returns `false`, leaving `out` empty, if `bytes` is not UTF-8: then only
/// [`parse_properties`] (which decodes lossily, like Java) gives RocketMQ's result.
///
/// On UTF-8 text, splitting the bytes on `\x02` and `\x01` is splitting the characters: both
/// are ASCII and never occur inside a multi-byte sequence.
pub fn parse_properties_into<'a>(bytes: &'a [u8], out: &mut Vec<(&'a str, &'a str)>) -> bool {
    out.clear();
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    // Byte searches, then O(1) slicing of the checked text at ASCII separators.
    let mut start = 0;
    while start <= bytes.len() {
        let rest = bytes.get(start..).unwrap_or_default();
        let end = rest
            .iter()
            .position(|&b| b == PROPERTY_SEPARATOR)
            .map_or(bytes.len(), |p| start + p);
        let segment = bytes.get(start..end).unwrap_or_default();
        if let Some(sep) = segment.iter().position(|&b| b == NAME_VALUE_SEPARATOR) {
            let name = text.get(start..start + sep);
            let value = text.get(start + sep + 1..end);
            if let (Some(name), Some(value)) = (name, value) {
                if !name.is_empty() && !value.is_empty() {
                    match out.iter_mut().find(|(k, _)| *k == name) {
                        Some(slot) => slot.1 = value,
                        None => out.push((name, value)),
                    }
                }
            }
        }
        start = end + 1;
    }
    true
}

/// The value [`parse_properties`] would give `name`, found without building the map: the
/// last non-empty value of a pair named `name`, as raw bytes (callers decode it; on valid
/// UTF-8 properties it is the same text).
pub fn property_value<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let [value] = property_values(bytes, [name]);
    value
}

/// [`property_value`] of several names, in one pass over the properties string.
pub fn property_values<'a, const N: usize>(
    bytes: &'a [u8],
    names: [&str; N],
) -> [Option<&'a [u8]>; N] {
    let mut found = [None; N];
    // A name holding a separator (or empty) is never a pair's name.
    let usable = names.map(|n| {
        !n.is_empty()
            && !n
                .bytes()
                .any(|b| b == NAME_VALUE_SEPARATOR || b == PROPERTY_SEPARATOR)
    });
    for segment in segments(bytes) {
        for ((slot, name), usable) in found.iter_mut().zip(names).zip(usable) {
            // The pair's name runs to the segment's first `\x01`: `name` (which holds none)
            // is that name exactly when the segment starts with it and a `\x01` right after.
            let n = name.len();
            if usable
                && segment.get(n) == Some(&NAME_VALUE_SEPARATOR)
                && segment.get(..n) == Some(name.as_bytes())
            {
                let value = segment.get(n + 1..).unwrap_or_default();
                if !value.is_empty() {
                    *slot = Some(value);
                }
            }
        }
    }
    found
}

/// The segments of a properties string between its `\x02` separators, like
/// `bytes.split(|&b| b == PROPERTY_SEPARATOR)` (one empty segment for empty bytes, one after
/// a final separator), with the separators found eight bytes at a time.
fn segments(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut from = Some(0usize);
    std::iter::from_fn(move || {
        let start = from?;
        let end = next_property_separator(bytes, start);
        from = (end < bytes.len()).then_some(end + 1);
        Some(bytes.get(start..end).unwrap_or_default())
    })
}

/// The position of the first `\x02` in `bytes` at or after `from`, or `bytes.len()`.
fn next_property_separator(bytes: &[u8], from: usize) -> usize {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const SEP: u64 = 0x0101_0101_0101_0101 * PROPERTY_SEPARATOR as u64;
    let mut pos = from;
    while let Some(word) = bytes
        .get(pos..pos + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
    {
        // Big-endian: the first byte is the most significant. A byte of `x` is zero where the
        // word holds a separator; `zero` flags exactly those bytes (no carry crosses a byte).
        let x = u64::from_be_bytes(word) ^ SEP;
        let zero = !(((x & LOW7) + LOW7) | x | LOW7);
        if zero != 0 {
            return pos + (zero.leading_zeros() / 8) as usize;
        }
        pos += 8;
    }
    bytes
        .iter()
        .skip(pos)
        .position(|&b| b == PROPERTY_SEPARATOR)
        .map_or(bytes.len(), |i| pos + i)
}

/// The iteration order of a `java.util.HashMap` created with `new HashMap<>(capacity)` into which
/// `keys` were `put` in the given order. Returns indices into `keys`; a repeated key appears once,
/// at the index of its first occurrence (a repeated `put` does not move an entry).
///
/// Model: the table size is `capacity` rounded up to a power of two (`HashMap.tableSizeFor`, at
/// least 1) and doubles while the number of distinct keys exceeds 0.75 × table size (resizing
/// splits buckets but keeps the relative order inside each one). Entry order is by bucket
/// `(h ^ (h >>> 16)) & (size - 1)` ascending, with `h` = Java `String.hashCode`, then insertion
/// order within a bucket. Treeification (8+ colliding keys) is ignored.
///
/// Spec §16 vector 8: keys `UNIQ_KEY, TAGS, KEYS, WAIT, CLUSTER` with capacity 128 iterate as
/// `UNIQ_KEY, CLUSTER, TAGS, KEYS, WAIT`; with capacity 16 as `KEYS, UNIQ_KEY, CLUSTER, WAIT, TAGS`.
pub fn java_hashmap_order(keys: &[&str], capacity: usize) -> Vec<usize> {
    const MAX_TABLE: usize = 1 << 30;
    let mut distinct: Vec<usize> = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        if !distinct.iter().any(|&j| keys.get(j) == Some(k)) {
            distinct.push(i);
        }
    }
    let mut table = capacity
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(MAX_TABLE)
        .min(MAX_TABLE);
    // threshold = (int)(table * 0.75f), computed exactly for powers of two.
    while table < MAX_TABLE && distinct.len() > table - table / 4 - usize::from(table < 4) {
        table *= 2;
    }
    let mask = table - 1;
    let bucket = |i: usize| -> usize {
        let h = keys.get(i).map_or(0, |k| java_string_hash(k));
        let spread = h ^ ((h as u32) >> 16) as i32;
        (spread as u32 as usize) & mask
    };
    // Stable sort keeps insertion order inside a bucket.
    distinct.sort_by_key(|&i| bucket(i));
    distinct
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    use super::*;

    /// `property_value` as it was first written: a byte-wise split, a search per segment.
    fn property_value_reference<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
        let mut found = None;
        for segment in bytes.split(|&b| b == PROPERTY_SEPARATOR) {
            let Some(sep) = segment.iter().position(|&b| b == NAME_VALUE_SEPARATOR) else {
                continue;
            };
            let (n, rest) = segment.split_at(sep);
            let value = rest.get(1..).unwrap_or_default();
            if !n.is_empty() && !value.is_empty() && n == name.as_bytes() {
                found = Some(value);
            }
        }
        found
    }

    #[test]
    fn separators_are_found_in_every_position() {
        for len in 0..40 {
            for at in 0..=len {
                for other in [0u8, 1, 3, 0x82, 0xff] {
                    let mut raw = vec![other; len];
                    if let Some(b) = raw.get_mut(at) {
                        *b = PROPERTY_SEPARATOR;
                    }
                    for from in 0..=len {
                        let expected = (from..len)
                            .find(|&i| raw[i] == PROPERTY_SEPARATOR)
                            .unwrap_or(len);
                        assert_eq!(next_property_separator(&raw, from), expected);
                    }
                }
            }
        }
    }

    #[test]
    fn property_values_match_the_bytewise_search() {
        let names = ["TAGS", "KEYS", "UNIQ_KEY", "a", "", "a\x01b", "b\x02", "aa"];
        let parts: [&[u8]; 9] = [
            b"TAGS",
            b"KEYS",
            b"UNIQ_KEY",
            b"a",
            b"\x01",
            b"\x02",
            b"b",
            b"0123456789",
            b"\xff",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..20_000 {
            let raw: Vec<u8> = (0..next(20))
                .flat_map(|_| parts[next(parts.len() as u64) as usize].to_vec())
                .collect();
            for name in names {
                assert_eq!(
                    property_value(&raw, name),
                    property_value_reference(&raw, name),
                    "{raw:?} {name:?}"
                );
            }
            let [tags, uniq] = property_values(&raw, ["TAGS", "UNIQ_KEY"]);
            assert_eq!(tags, property_value_reference(&raw, "TAGS"));
            assert_eq!(uniq, property_value_reference(&raw, "UNIQ_KEY"));
        }
    }

    #[test]
    fn borrowed_parsing_agrees_with_the_owned_parser() {
        let cases: [&[u8]; 6] = [
            b"TAGS\x01A\x02KEYS\x01k1 k2\x02",
            b"A\x01x\x02B\x01\x02\x01c\x02A\x01y\x02C\x01v\x01w",
            b"",
            b"\x02\x02\x01\x02",
            "T\u{e9}\x01\u{2603}\x02".as_bytes(),
            b"noseparator",
        ];
        let mut out = Vec::new();
        for raw in cases {
            assert!(parse_properties_into(raw, &mut out));
            let owned = parse_properties(raw);
            let pairs: Vec<(&str, &str)> = owned.iter().collect();
            assert_eq!(out, pairs, "{raw:?}");
            for (k, v) in owned.iter() {
                assert_eq!(property_value(raw, k), Some(v.as_bytes()));
            }
            assert_eq!(property_value(raw, "absent"), None);
        }
        assert!(!parse_properties_into(b"A\x01\xff\x02", &mut out));
        assert!(out.is_empty());
    }

    const V8_KEYS: [&str; 5] = ["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "CLUSTER"];
    const V8_VALUES: [&str; 5] = [
        "7F000001000078308DB1745A55D70000",
        "TagA",
        "OrderID001",
        "true",
        "DefaultCluster",
    ];

    fn names(order: &[usize]) -> Vec<&'static str> {
        order.iter().map(|&i| V8_KEYS[i]).collect()
    }

    #[test]
    fn vector_8_property_order() {
        assert_eq!(
            names(&java_hashmap_order(&V8_KEYS, 128)),
            ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]
        );
        assert_eq!(
            names(&java_hashmap_order(&V8_KEYS, 16)),
            ["KEYS", "UNIQ_KEY", "CLUSTER", "WAIT", "TAGS"]
        );
        // Non-power-of-two capacities round up like HashMap.tableSizeFor.
        assert_eq!(
            java_hashmap_order(&V8_KEYS, 100),
            java_hashmap_order(&V8_KEYS, 128)
        );
        // The 128-order string is 101 bytes (vector 8 / vector 6).
        let order = java_hashmap_order(&V8_KEYS, 128);
        let mut out = Vec::new();
        encode_properties(order.iter().map(|&i| (V8_KEYS[i], V8_VALUES[i])), &mut out);
        assert_eq!(out.len(), 101);
        assert_eq!(
            encoded_properties_len(order.iter().map(|&i| (V8_KEYS[i], V8_VALUES[i]))),
            101
        );
        assert!(out.starts_with(b"UNIQ_KEY\x017F000001000078308DB1745A55D70000\x02CLUSTER\x01"));
        // Whatever the order, parsing gives the same map.
        let parsed = parse_properties(&out);
        for (k, v) in V8_KEYS.iter().zip(V8_VALUES) {
            assert_eq!(parsed.get(k), Some(v));
        }
    }

    #[test]
    fn hashmap_order_duplicates_and_resize() {
        assert_eq!(java_hashmap_order(&["A", "B", "A"], 16), vec![0, 1]);
        assert!(java_hashmap_order(&[], 0).is_empty());
        // 13 keys into capacity 16 exceed the 12-entry threshold: the table becomes 32.
        let keys: Vec<String> = (0..13).map(|i| format!("k{i}")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        assert_eq!(java_hashmap_order(&refs, 16), java_hashmap_order(&refs, 32));
        // Capacity 0 behaves like a 1-slot table that grows.
        assert_eq!(
            java_hashmap_order(&V8_KEYS, 0),
            java_hashmap_order(&V8_KEYS, 8)
        );
    }

    #[test]
    fn vector_9_parsing() {
        let p = parse_properties(b"A\x01\x02B\x01x\x02");
        assert_eq!(p.len(), 1);
        assert_eq!(p.get("B"), Some("x"));
        assert_eq!(p.get("A"), None);
        let p = parse_properties(b"K\x01v1\x02K\x01v2\x02");
        assert_eq!(p.len(), 1);
        assert_eq!(p.get("K"), Some("v2"));
    }

    #[test]
    fn parsing_edge_cases() {
        assert!(parse_properties(b"").is_empty());
        assert!(parse_properties(b"\x02\x02\x01\x02").is_empty());
        assert!(parse_properties(b"\x01v\x02").is_empty());
        assert!(parse_properties(b"novalue\x02").is_empty());
        // No trailing separator: the last segment still counts.
        assert_eq!(parse_properties(b"a\x01b").get("a"), Some("b"));
        // The value keeps any further \x01.
        assert_eq!(
            parse_properties(b"a\x01b\x01c\x02").get("a"),
            Some("b\x01c")
        );
        // Invalid UTF-8 is replaced, not rejected.
        assert_eq!(
            parse_properties(b"a\x01\xFF\x02").get("a"),
            Some("\u{FFFD}")
        );
        // Order: first occurrence position, last value.
        let p = parse_properties(b"X\x011\x02Y\x012\x02X\x013\x02");
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![("X", "3"), ("Y", "2")]);
    }

    #[test]
    fn map_methods() {
        let mut p: Properties = [("KEYS", " a  b "), ("TAGS", "t"), ("UNIQ_KEY", "u")]
            .into_iter()
            .collect();
        assert_eq!(p.keys_list(), vec!["a", "b"]);
        assert_eq!(p.tags(), Some("t"));
        assert_eq!(p.uniq_key(), Some("u"));
        assert_eq!(p.insert("TAGS", "t2"), Some("t".to_string()));
        assert_eq!(p.insert("NEW", "n"), None);
        assert_eq!(p.len(), 4);
        assert_eq!(p.remove("KEYS"), Some(" a  b ".to_string()));
        assert!(p.keys_list().is_empty());
        assert!(p.contains_key("NEW"));
        assert_eq!(p.to_bytes(), b"TAGS\x01t2\x02UNIQ_KEY\x01u\x02NEW\x01n\x02");
        assert_eq!(p.encoded_len(), p.to_bytes().len());
        assert_eq!(parse_properties(&p.to_bytes()), p);
        assert_eq!(p.clone().into_vec().len(), 3);
        assert!(Properties::new().is_empty());
    }

    #[test]
    fn validate() {
        assert!(validate_property("a", "b").is_ok());
        assert!(validate_property("", "b").is_err());
        assert!(validate_property("a", "").is_err());
        assert!(validate_property("a\u{1}", "b").is_err());
        assert!(validate_property("a", "b\u{2}").is_err());
        assert!(validate_property("a", "\u{0}").is_err());
        let e = validate_property("a", "x\u{2}").unwrap_err();
        assert_eq!(e.field, "property value");
        assert_eq!(
            e.reason,
            FieldErrorReason::IllegalChar {
                ch: '\u{2}',
                index: 1
            }
        );
    }
}

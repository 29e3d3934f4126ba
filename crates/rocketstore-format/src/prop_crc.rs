//! The optional whole-record CRC property `__CRC32#` (RocketMQ 5.2+, `enabledAppendPropCRC`,
//! spec §3.6).
//!
//! The property is the last 20 bytes of the record: `__CRC32#` 0x01, ten ASCII digits, 0x02.
//! The digits are the masked CRC-32 of the record bytes `[0, TOTALSIZE - 20)`, computed after
//! QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP are filled in, written least-significant digit
//! first and padded with `'0'` (CRC 1234567 is `"7654321000"`). Unlike BODYCRC it covers the
//! header, the topic and the other properties.

use crate::hash::crc32_masked;

/// Length of the property: `__CRC32#` + 0x01 + 10 digits + 0x02.
pub const PROP_CRC_LEN: usize = 20;

const PREFIX: &[u8; 9] = b"__CRC32#\x01";

/// Appends the property with placeholder digits to an encoded properties string. A 0x02 is
/// inserted first if `props` is non-empty and does not end in one.
pub fn append_placeholder(props: &mut Vec<u8>) {
    if props
        .last()
        .is_some_and(|&b| b != crate::PROPERTY_SEPARATOR)
    {
        props.push(crate::PROPERTY_SEPARATOR);
    }
    props.extend_from_slice(PREFIX);
    props.extend_from_slice(b"0000000000");
    props.push(crate::PROPERTY_SEPARATOR);
}

/// The ten digits for `crc`, least-significant digit first.
pub fn digits(crc: i32) -> [u8; 10] {
    let mut v = crc as u32;
    let mut out = [b'0'; 10];
    for d in &mut out {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out
}

/// True if the record's last 20 bytes are a `__CRC32#` property.
pub fn has_prop_crc(record: &[u8]) -> bool {
    let n = record.len();
    n >= PROP_CRC_LEN
        && record.get(n - PROP_CRC_LEN..n - PROP_CRC_LEN + PREFIX.len()) == Some(PREFIX.as_slice())
        && record.last() == Some(&crate::PROPERTY_SEPARATOR)
}

/// Fills the digits of a record that ends with the placeholder. Returns false (and changes
/// nothing) if the record does not end with a `__CRC32#` property.
pub fn seal(record: &mut [u8]) -> bool {
    if !has_prop_crc(record) {
        return false;
    }
    let n = record.len();
    let crc = crc32_masked(record.get(..n - PROP_CRC_LEN).unwrap_or(&[]));
    if let Some(dst) = record.get_mut(n - 11..n - 1) {
        dst.copy_from_slice(&digits(crc));
    }
    true
}

/// Bodies at least this long are not read a second time by [`seal_with_body_crc`]: below it,
/// hashing the body again costs less than the CRC-32 combination (a 32-step GF(2) product).
pub const COMBINE_MIN_BODY: usize = 2048;

/// The CRC-32 operator that appends `len` zero bytes (x^(8·len) mod P, reflected), kept for the
/// last body length so a batch of equal-sized bodies computes it once.
#[derive(Debug, Default, Clone, Copy)]
pub struct BodyShift {
    len: u64,
    op: u32,
}

impl BodyShift {
    fn op(&mut self, len: u64) -> u32 {
        if self.op == 0 || self.len != len {
            self.len = len;
            self.op = x8n(len);
        }
        self.op
    }
}

const POLY: u32 = 0xEDB8_8320;

/// a(x)·b(x) mod P(x), reflected (zlib's `multmodp`).
fn multiply(a: u32, mut b: u32) -> u32 {
    let mut p = 0u32;
    for i in 0..32 {
        p ^= b & ((a >> (31 - i)) & 1).wrapping_neg();
        b = (b >> 1) ^ ((b & 1).wrapping_neg() & POLY);
    }
    p
}

/// x^(8·len) mod P(x), reflected.
fn x8n(mut len: u64) -> u32 {
    let mut p = 0x8000_0000; // x^0
    let mut sq = 0x0080_0000; // x^8
    while len != 0 {
        if len & 1 != 0 {
            p = multiply(sq, p);
        }
        sq = multiply(sq, sq);
        len >>= 1;
    }
    p
}

/// As [`seal`], for a record whose body `record[body_pos..body_pos + body_len]` has the
/// (unmasked) CRC-32 `body_crc`: for bodies of [`COMBINE_MIN_BODY`] bytes or more, the bytes
/// before and after the body are hashed and combined with it (CRC-32 combination) instead of
/// reading the body a second time. The digits are always the same as [`seal`]'s. Falls back to
/// [`seal`] for short bodies or a body range not inside the covered bytes.
pub fn seal_with_body_crc(
    record: &mut [u8],
    body_pos: usize,
    body_len: usize,
    body_crc: u32,
    shift: &mut BodyShift,
) -> bool {
    if !has_prop_crc(record) {
        return false;
    }
    let covered = record.len() - PROP_CRC_LEN;
    let (Some(head), Some(tail)) = (
        record.get(..body_pos),
        body_pos
            .checked_add(body_len)
            .and_then(|end| record.get(end..covered)),
    ) else {
        return seal(record);
    };
    if body_len < COMBINE_MIN_BODY {
        return seal(record);
    }
    // crc(head ‖ body) = crc(head)·x^(8·|body|) ⊕ crc(body); then continue over the tail.
    let head_body = multiply(shift.op(body_len as u64), crc32fast::hash(head)) ^ body_crc;
    let mut h = crc32fast::Hasher::new_with_initial(head_body);
    h.update(tail);
    // `covered` is never empty (it holds the header), so no empty-input special case applies.
    let crc = i32::try_from(h.finalize() & 0x7FFF_FFFF).unwrap_or(0);
    let n = record.len();
    if let Some(dst) = record.get_mut(n - 11..n - 1) {
        dst.copy_from_slice(&digits(crc));
    }
    true
}

/// Verifies a record's `__CRC32#` property: `None` if it has none, `Some(ok)` otherwise.
pub fn verify(record: &[u8]) -> Option<bool> {
    if !has_prop_crc(record) {
        return None;
    }
    let n = record.len();
    let crc = crc32_masked(record.get(..n - PROP_CRC_LEN)?);
    Some(record.get(n - 11..n - 1)? == digits(crc).as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_digit_order() {
        assert_eq!(&digits(1_234_567), b"7654321000");
        assert_eq!(&digits(0), b"0000000000");
        assert_eq!(&digits(i32::MAX), b"7463847412");
    }

    #[test]
    fn seal_and_verify() {
        let mut props = b"TAGS\x01A".to_vec();
        append_placeholder(&mut props);
        assert_eq!(props.len(), 6 + 1 + PROP_CRC_LEN);
        let mut rec = b"header-bytes-".to_vec();
        rec.extend_from_slice(&props);
        assert_eq!(verify(&rec), Some(false));
        assert!(seal(&mut rec));
        assert_eq!(verify(&rec), Some(true));
        rec[3] ^= 1;
        assert_eq!(verify(&rec), Some(false));
        assert_eq!(verify(b"no crc here"), None);
        assert!(!seal(&mut b"short".to_vec()));
    }

    #[test]
    fn seal_with_body_crc_writes_the_same_digits() {
        let mut shift = BodyShift::default();
        for body_len in [0usize, 1, 7, 100, 1024, 2048, 4099, 4099, 65_536, 2049] {
            let body: Vec<u8> = (0..body_len).map(|i| (i * 7 + 3) as u8).collect();
            let mut props = b"TAGS\x01A\x02KEYS\x01k1 k2".to_vec();
            append_placeholder(&mut props);
            let mut rec = b"header-bytes-of-some-length".to_vec();
            let body_pos = rec.len();
            rec.extend_from_slice(&body);
            rec.extend_from_slice(b"\x05Topic");
            rec.extend_from_slice(&props);
            let mut a = rec.clone();
            assert!(seal(&mut a));
            let mut b = rec.clone();
            assert!(seal_with_body_crc(
                &mut b,
                body_pos,
                body_len,
                crc32fast::hash(&body),
                &mut shift
            ));
            assert_eq!(a, b, "body of {body_len} bytes");
            // A body range outside the covered bytes falls back to a full seal.
            let mut c = rec.clone();
            assert!(seal_with_body_crc(&mut c, rec.len(), 5, 0, &mut shift));
            assert_eq!(a, c);
        }
    }
}

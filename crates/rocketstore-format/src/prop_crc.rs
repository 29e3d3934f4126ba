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
}

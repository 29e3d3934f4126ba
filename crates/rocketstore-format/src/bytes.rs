//! Private big-endian readers and writers over byte slices.
//!
//! Every reader returns `None` instead of panicking when the requested range is not inside the
//! slice (including when `pos + N` would overflow `usize`). Every writer reports failure the same
//! way. Nothing in this module indexes a slice directly.

/// `N` bytes at `pos`, or `None` if `[pos, pos + N)` is not inside `buf`.
pub(crate) fn array_at<const N: usize>(buf: &[u8], pos: usize) -> Option<[u8; N]> {
    let end = pos.checked_add(N)?;
    buf.get(pos..end)?.try_into().ok()
}

/// The byte at `pos` as a signed 8-bit integer.
pub(crate) fn i8_at(buf: &[u8], pos: usize) -> Option<i8> {
    array_at::<1>(buf, pos).map(i8::from_be_bytes)
}

/// Big-endian `i16` at `pos`.
pub(crate) fn i16_at(buf: &[u8], pos: usize) -> Option<i16> {
    array_at::<2>(buf, pos).map(i16::from_be_bytes)
}

/// Big-endian `i32` at `pos`.
pub(crate) fn i32_at(buf: &[u8], pos: usize) -> Option<i32> {
    array_at::<4>(buf, pos).map(i32::from_be_bytes)
}

/// Big-endian `u32` at `pos`.
pub(crate) fn u32_at(buf: &[u8], pos: usize) -> Option<u32> {
    array_at::<4>(buf, pos).map(u32::from_be_bytes)
}

/// Big-endian `i64` at `pos`.
pub(crate) fn i64_at(buf: &[u8], pos: usize) -> Option<i64> {
    array_at::<8>(buf, pos).map(i64::from_be_bytes)
}

/// Big-endian `u64` at `pos`.
pub(crate) fn u64_at(buf: &[u8], pos: usize) -> Option<u64> {
    array_at::<8>(buf, pos).map(u64::from_be_bytes)
}

/// `len` bytes at `pos`, or `None` if out of bounds.
pub(crate) fn slice_at(buf: &[u8], pos: usize, len: usize) -> Option<&[u8]> {
    let end = pos.checked_add(len)?;
    buf.get(pos..end)
}

/// Copies `bytes` into `buf` at `pos`; `None` (and nothing written) if it does not fit.
pub(crate) fn put_at(buf: &mut [u8], pos: usize, bytes: &[u8]) -> Option<()> {
    let end = pos.checked_add(bytes.len())?;
    buf.get_mut(pos..end)?.copy_from_slice(bytes);
    Some(())
}

/// A sequential big-endian writer over a mutable slice. Never panics: every `put` that does not
/// fit returns `None` and leaves the cursor unchanged.
#[derive(Debug)]
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    /// A writer starting at position 0 of `buf`.
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }

    /// Current position (bytes written so far).
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// Appends raw bytes.
    pub(crate) fn put(&mut self, bytes: &[u8]) -> Option<()> {
        put_at(self.buf, self.pos, bytes)?;
        self.pos = self.pos.checked_add(bytes.len())?;
        Some(())
    }

    /// Appends a big-endian `i16`.
    pub(crate) fn put_i16(&mut self, v: i16) -> Option<()> {
        self.put(&v.to_be_bytes())
    }

    /// Appends a big-endian `i32`.
    pub(crate) fn put_i32(&mut self, v: i32) -> Option<()> {
        self.put(&v.to_be_bytes())
    }

    /// Appends a big-endian `i64`.
    pub(crate) fn put_i64(&mut self, v: i64) -> Option<()> {
        self.put(&v.to_be_bytes())
    }
}

/// Uppercase hex rendering (RocketMQ `UtilAll.bytes2string`).
pub(crate) fn hex_upper(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(2));
    push_hex_upper(&mut out, bytes);
    // Only ASCII hex digits were pushed.
    String::from_utf8(out).unwrap_or_default()
}

/// Appends `bytes` as uppercase hex (two ASCII digits a byte) to `out`.
pub(crate) fn push_hex_upper(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len().saturating_mul(2));
    for &b in bytes {
        out.extend_from_slice(&hex_pair(b));
    }
}

/// The uppercase hex digit of a nibble (`n` < 16).
const fn hex_digit(n: u8) -> u8 {
    if n < 10 {
        b'0' + n
    } else {
        b'A' + (n - 10)
    }
}

/// The two uppercase hex digits of every byte value.
// Evaluated at compile time: an index out of bounds would fail the build, not a run.
#[allow(clippy::indexing_slicing)]
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut t = [[0u8; 2]; 256];
    let mut b: u8 = 0;
    loop {
        t[b as usize] = [hex_digit(b >> 4), hex_digit(b & 0x0F)];
        if b == u8::MAX {
            break;
        }
        b += 1;
    }
    t
};

/// The two uppercase hex digits of `b` (a table lookup).
#[inline]
pub(crate) fn hex_pair(b: u8) -> [u8; 2] {
    HEX_PAIRS.get(usize::from(b)).copied().unwrap_or([b'0'; 2])
}

/// Appends the 16 uppercase hex digits of `v`, big-endian (one write of the whole run).
pub(crate) fn push_hex_upper_u64(out: &mut Vec<u8>, v: u64) {
    let mut digits = [0u8; 16];
    let (high, low) = digits.split_at_mut(8);
    high.copy_from_slice(&hex_upper_u32(v.wrapping_shr(32) as u32));
    low.copy_from_slice(&hex_upper_u32(v as u32));
    out.extend_from_slice(&digits);
}

/// The 8 uppercase hex digits of `v`, big-endian, computed in one register: each nibble is
/// spread to its own byte, then mapped to `0-9` or `A-F` without a branch or a table.
fn hex_upper_u32(v: u32) -> [u8; 8] {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // Bytes holding 10-15 get bit 4 set by adding 6; they then need 7 more than digits do.
    let letters = ((x + 6 * ONES) >> 4) & ONES;
    (x + u64::from(b'0') * ONES + letters * 7).to_be_bytes()
}

/// Parses case-insensitive hex; `None` on an odd length or a non-hex character.
pub(crate) fn hex_decode(s: &str) -> Option<Vec<u8>> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let pairs = s.as_bytes().chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return None;
    }
    pairs
        .map(|pair| match pair {
            [hi, lo] => Some((nibble(*hi)? << 4) | nibble(*lo)?),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn hex_upper_u64_matches_the_pair_table() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut values = vec![
            0,
            1,
            9,
            10,
            15,
            16,
            u64::MAX,
            u64::MAX - 1,
            0x0123_4567_89ab_cdef,
        ];
        for _ in 0..10_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            values.push(seed);
        }
        for v in values {
            let mut out = Vec::new();
            push_hex_upper_u64(&mut out, v);
            let expected: Vec<u8> = v.to_be_bytes().iter().flat_map(|&b| hex_pair(b)).collect();
            assert_eq!(out, expected, "{v:#x}");
            assert_eq!(out, format!("{v:016X}").into_bytes());
        }
    }

    #[test]
    fn readers_are_bounds_checked() {
        let b = [0u8, 1, 2, 3, 4, 5, 6, 7];
        assert_eq!(i32_at(&b, 0), Some(0x0001_0203));
        assert_eq!(i32_at(&b, 4), Some(0x0405_0607));
        assert_eq!(i32_at(&b, 5), None);
        assert_eq!(i64_at(&b, 0), Some(0x0001_0203_0405_0607));
        assert_eq!(i64_at(&b, 1), None);
        assert_eq!(i32_at(&b, usize::MAX), None);
        assert_eq!(slice_at(&b, usize::MAX, 2), None);
        assert_eq!(i8_at(&[0xFF], 0), Some(-1));
    }

    #[test]
    fn writer_stops_at_end() {
        let mut b = [0u8; 6];
        let mut w = Writer::new(&mut b);
        assert!(w.put_i32(-1).is_some());
        assert!(w.put_i32(1).is_none());
        assert_eq!(w.position(), 4);
        assert!(w.put_i16(0x0102).is_some());
        assert_eq!(b, [0xFF, 0xFF, 0xFF, 0xFF, 1, 2]);
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(hex_upper(&[0x0A, 0xff, 0]), "0AFF00");
        assert_eq!(hex_decode("0aFf00"), Some(vec![0x0A, 0xFF, 0]));
        assert_eq!(hex_decode("0"), None);
        assert_eq!(hex_decode("zz"), None);
        assert_eq!(hex_decode("é1"), None);
    }
}

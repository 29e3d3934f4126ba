//! Message ids (spec §4): the offset message id (store host + PHYSICALOFFSET) and the client
//! `UNIQ_KEY` layout.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::bytes::{
    array_at, hex_decode, hex_upper, i32_at, i64_at, push_hex_upper, push_hex_upper_u64,
};
use crate::error::{FieldError, FieldErrorReason};
use crate::host::{HostAddr, HOST_V4_LEN, HOST_V6_LEN};

/// Length of an IPv4 offset message id in hex characters (16 bytes).
pub const OFFSET_MSG_ID_V4_LEN: usize = 32;
/// Length of an IPv6 offset message id in hex characters (28 bytes).
pub const OFFSET_MSG_ID_V6_LEN: usize = 56;

/// The offset message id (§4.1): store-host IP (4 or 16 bytes) + port (i32) + PHYSICALOFFSET
/// (i64), all big-endian, as uppercase hex (32 or 56 characters).
///
/// `10.0.0.1:10911` at offset 1073741824 gives `0A00000100002A9F0000000040000000`.
pub fn offset_msg_id(store_host: &HostAddr, physical_offset: i64) -> String {
    let mut bytes = store_host.to_bytes();
    bytes.extend_from_slice(&physical_offset.to_be_bytes());
    hex_upper(&bytes)
}

/// Writes offset message ids (§4.1, as [`offset_msg_id`]) into a byte buffer without a
/// `String` a row: the store host's hex is computed once and kept while the host repeats.
///
/// ```
/// use rocketstore_format::{offset_msg_id, HostAddr, OffsetMsgIds};
///
/// let host: HostAddr = "10.0.0.1:10911".parse().unwrap();
/// let mut ids = OffsetMsgIds::default();
/// let mut out = Vec::new();
/// ids.push_id(&mut out, host, 1_073_741_824);
/// assert_eq!(out, offset_msg_id(&host, 1_073_741_824).into_bytes());
/// ```
#[derive(Clone, Debug, Default)]
pub struct OffsetMsgIds {
    host: Option<HostAddr>,
    prefix: Vec<u8>,
}

impl OffsetMsgIds {
    /// Appends the offset message id of (`host`, `physical_offset`) to `out` (32 or 56 bytes
    /// of uppercase hex).
    pub fn push_id(&mut self, out: &mut Vec<u8>, host: HostAddr, physical_offset: i64) {
        if self.host != Some(host) {
            self.prefix.clear();
            push_hex_upper(&mut self.prefix, &host.to_bytes());
            self.host = Some(host);
        }
        out.extend_from_slice(&self.prefix);
        push_hex_upper_u64(out, physical_offset as u64);
    }
}

/// Parses an offset message id: 32 hex characters = IPv4, 56 = IPv6 (case-insensitive).
///
/// # Errors
/// [`FieldError`] with field `"msg id"` for any other length or a non-hex character.
pub fn decode_offset_msg_id(id: &str) -> Result<(HostAddr, i64), FieldError> {
    let v6 = match id.len() {
        OFFSET_MSG_ID_V4_LEN => false,
        OFFSET_MSG_ID_V6_LEN => true,
        len => {
            return Err(FieldError::new(
                "msg id",
                FieldErrorReason::BadLength { len },
            ))
        }
    };
    let bytes = hex_decode(id).ok_or(FieldError::new(
        "msg id",
        FieldErrorReason::Invalid("not hexadecimal"),
    ))?;
    let bad = || FieldError::new("msg id", FieldErrorReason::Invalid("truncated"));
    let host = HostAddr::decode_at(&bytes, 0, v6).ok_or_else(bad)?;
    // The offset follows the address as written (16 bytes in the long form, even when the
    // address decodes as IPv4-mapped).
    let offset = i64_at(&bytes, if v6 { HOST_V6_LEN } else { HOST_V4_LEN }).ok_or_else(bad)?;
    Ok((host, offset))
}

/// The per-process fixed part of a `UNIQ_KEY` (§4.2): local IP, PID and class-loader hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UniqKeyPrefix {
    /// Local IP (4 or 16 bytes in the key).
    pub ip: IpAddr,
    /// Process id, truncated to 16 bits.
    pub pid: i16,
    /// Java class-loader `hashCode` (any stable per-process value).
    pub class_loader_hash: i32,
}

/// A `UNIQ_KEY` (§4.2): `ip + pid (i16) + class_loader_hash (i32) + millis since the start of the
/// month (i32) + counter (i16)`, big-endian, as uppercase hex: 32 characters for IPv4, 56 for IPv6.
pub fn uniq_key(prefix: &UniqKeyPrefix, millis_since_month_start: i32, counter: i16) -> String {
    let mut bytes = Vec::with_capacity(28);
    match prefix.ip {
        IpAddr::V4(a) => bytes.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => bytes.extend_from_slice(&a.octets()),
    }
    bytes.extend_from_slice(&prefix.pid.to_be_bytes());
    bytes.extend_from_slice(&prefix.class_loader_hash.to_be_bytes());
    bytes.extend_from_slice(&millis_since_month_start.to_be_bytes());
    bytes.extend_from_slice(&counter.to_be_bytes());
    hex_upper(&bytes)
}

/// Parses a `UNIQ_KEY` back into `(prefix, millis_since_month_start, counter)`; `None` unless it
/// is 32 or 56 hex characters.
pub fn decode_uniq_key(key: &str) -> Option<(UniqKeyPrefix, i32, i16)> {
    let bytes = hex_decode(key)?;
    let ip_len = match bytes.len() {
        16 => 4,
        28 => 16,
        _ => return None,
    };
    let ip = if ip_len == 4 {
        IpAddr::V4(Ipv4Addr::from(array_at::<4>(&bytes, 0)?))
    } else {
        IpAddr::V6(Ipv6Addr::from(array_at::<16>(&bytes, 0)?))
    };
    let pid = i16::from_be_bytes(array_at::<2>(&bytes, ip_len)?);
    let class_loader_hash = i32_at(&bytes, ip_len + 2)?;
    let millis = i32_at(&bytes, ip_len + 6)?;
    let counter = i16::from_be_bytes(array_at::<2>(&bytes, ip_len + 10)?);
    Some((
        UniqKeyPrefix {
            ip,
            pid,
            class_loader_hash,
        },
        millis,
        counter,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn offset_msg_ids_match_offset_msg_id() {
        let hosts: [HostAddr; 3] = [
            "10.0.0.1:10911".parse().unwrap(),
            "[2001:db8::1]:10911".parse().unwrap(),
            "10.0.0.2:1".parse().unwrap(),
        ];
        let mut ids = OffsetMsgIds::default();
        let mut out = Vec::new();
        let mut expected = String::new();
        for (i, offset) in [0, 1, 1_073_741_824, i64::MAX, -1].into_iter().enumerate() {
            for host in [hosts[i % 3], hosts[i % 3], hosts[(i + 1) % 3]] {
                ids.push_id(&mut out, host, offset);
                expected.push_str(&offset_msg_id(&host, offset));
            }
        }
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn vector_10_offset_msg_id() {
        let host: HostAddr = "10.0.0.1:10911".parse().unwrap();
        let id = offset_msg_id(&host, 1_073_741_824);
        assert_eq!(id, "0A00000100002A9F0000000040000000");
        assert_eq!(id.len(), 32);
        assert_eq!(decode_offset_msg_id(&id).unwrap(), (host, 1_073_741_824));
        assert_eq!(
            decode_offset_msg_id(&id.to_lowercase()).unwrap(),
            (host, 1_073_741_824)
        );
    }

    #[test]
    fn v6_and_errors() {
        let host: HostAddr = "[2001:db8::1]:10911".parse().unwrap();
        let id = offset_msg_id(&host, -1);
        assert_eq!(id.len(), 56);
        assert_eq!(decode_offset_msg_id(&id).unwrap(), (host, -1));
        assert!(decode_offset_msg_id("").is_err());
        assert!(decode_offset_msg_id(&"0".repeat(31)).is_err());
        assert!(decode_offset_msg_id(&"G".repeat(32)).is_err());
        // 32 bytes but not 32 ASCII characters.
        assert!(decode_offset_msg_id(&"é".repeat(16)).is_err());
    }

    #[test]
    fn uniq_key_layout() {
        // The UNIQ_KEY of spec vector 8: 127.0.0.1, pid 0, hash 0x78308DB1, time 0x745A55D7, counter 0.
        let prefix = UniqKeyPrefix {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            pid: 0,
            class_loader_hash: 0x7830_8DB1,
        };
        let key = uniq_key(&prefix, 0x745A_55D7, 0);
        assert_eq!(key, "7F000001000078308DB1745A55D70000");
        assert_eq!(decode_uniq_key(&key), Some((prefix, 0x745A_55D7, 0)));
        let p6 = UniqKeyPrefix {
            ip: "::1".parse().unwrap(),
            pid: -2,
            class_loader_hash: -3,
        };
        let k6 = uniq_key(&p6, 5, -1);
        assert_eq!(k6.len(), 56);
        assert_eq!(decode_uniq_key(&k6), Some((p6, 5, -1)));
        assert_eq!(decode_uniq_key("00"), None);
    }
}

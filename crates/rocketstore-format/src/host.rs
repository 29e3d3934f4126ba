//! [`HostAddr`]: the BORNHOST / STOREHOST fields of a record (spec §3.2): IP bytes in network order
//! followed by the port as a big-endian `i32`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use crate::bytes::{array_at, i32_at, Writer};
use crate::error::{FieldError, FieldErrorReason};

/// Encoded length of an IPv4 host: 4 address bytes + 4 port bytes.
pub const HOST_V4_LEN: usize = 8;
/// Encoded length of an IPv6 host: 16 address bytes + 4 port bytes.
pub const HOST_V6_LEN: usize = 20;

/// A host address as stored in a record. The port is an `i32` because that is what is on disk;
/// a decoded value may be outside `0..=65535`.
///
/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is an IPv4 host: [`HostAddr::new`], parsing
/// and decoding turn it into `IpAddr::V4`, and it is encoded as 4 bytes without the IPv6
/// SYSFLAG bit even when `ip` was set to the mapped form directly. That is how RocketMQ's Java
/// code sees it (`InetAddress.getByAddress` returns an `Inet4Address` for a mapped address), so
/// a broker re-encoding the record (the schedule service re-delivering it) writes the same
/// layout, instead of 4 address bytes under the 16-byte flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostAddr {
    /// The address. An `IpAddr::V6` is encoded as 16 bytes unless it is IPv4-mapped.
    pub ip: IpAddr,
    /// The port, as stored (`i32`).
    pub port: i32,
}

impl Default for HostAddr {
    /// `0.0.0.0:0`.
    fn default() -> Self {
        HostAddr {
            ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            port: 0,
        }
    }
}

impl HostAddr {
    /// A host from an address and a port; an IPv4-mapped IPv6 address becomes IPv4.
    pub fn new(ip: IpAddr, port: i32) -> Self {
        HostAddr {
            ip: ip.to_canonical(),
            port,
        }
    }

    /// Whether the address is encoded as IPv6 (decides SYSFLAG bit 4 / 5 and the 20-byte
    /// encoding): an IPv6 address that is not IPv4-mapped.
    pub fn is_v6(&self) -> bool {
        self.ip.to_canonical().is_ipv6()
    }

    /// Encoded length: 8 for IPv4, 20 for IPv6.
    pub fn encoded_len(&self) -> usize {
        if self.is_v6() {
            HOST_V6_LEN
        } else {
            HOST_V4_LEN
        }
    }

    /// The address as a [`SocketAddr`], or `None` if the port is outside `0..=65535`.
    pub fn to_socket_addr(&self) -> Option<SocketAddr> {
        u16::try_from(self.port)
            .ok()
            .map(|p| SocketAddr::new(self.ip, p))
    }

    /// The encoded bytes (8 or 20).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        match self.ip.to_canonical() {
            IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
            IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
        }
        out.extend_from_slice(&self.port.to_be_bytes());
        out
    }

    /// Decodes a host at `pos` of `buf`; `v6` selects the 20-byte form (an IPv4-mapped address
    /// in it decodes as IPv4, as Java reads it). `None` if out of bounds.
    pub fn decode_at(buf: &[u8], pos: usize, v6: bool) -> Option<HostAddr> {
        if v6 {
            let ip: [u8; 16] = array_at(buf, pos)?;
            let port = i32_at(buf, pos.checked_add(16)?)?;
            Some(HostAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port))
        } else {
            let ip: [u8; 4] = array_at(buf, pos)?;
            let port = i32_at(buf, pos.checked_add(4)?)?;
            Some(HostAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
        }
    }

    pub(crate) fn write(&self, w: &mut Writer<'_>) -> Option<()> {
        match self.ip.to_canonical() {
            IpAddr::V4(a) => w.put(&a.octets())?,
            IpAddr::V6(a) => w.put(&a.octets())?,
        }
        w.put_i32(self.port)
    }
}

impl From<SocketAddr> for HostAddr {
    fn from(s: SocketAddr) -> Self {
        HostAddr::new(s.ip(), i32::from(s.port()))
    }
}

impl fmt::Display for HostAddr {
    /// `1.2.3.4:10911` for IPv4 (and IPv4-mapped), `[::1]:10911` for IPv6.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip.to_canonical() {
            IpAddr::V4(a) => write!(f, "{a}:{}", self.port),
            IpAddr::V6(a) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

impl FromStr for HostAddr {
    type Err = FieldError;

    /// Accepts `a.b.c.d:port` and `[v6]:port` with `port` in `0..=65535`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (ip_part, port_part) = s.rsplit_once(':').ok_or(FieldError::new(
            "host",
            FieldErrorReason::Invalid("expected ip:port"),
        ))?;
        let port: u16 = port_part.parse().map_err(|_| {
            FieldError::new(
                "port",
                FieldErrorReason::Invalid("expected a port in 0..=65535"),
            )
        })?;
        let ip = if let Some(inner) = ip_part.strip_prefix('[') {
            let inner = inner.strip_suffix(']').ok_or(FieldError::new(
                "host",
                FieldErrorReason::Invalid("unterminated '[' in IPv6 address"),
            ))?;
            IpAddr::V6(inner.parse::<Ipv6Addr>().map_err(|_| {
                FieldError::new("host", FieldErrorReason::Invalid("bad IPv6 address"))
            })?)
            .to_canonical()
        } else {
            IpAddr::V4(ip_part.parse::<Ipv4Addr>().map_err(|_| {
                FieldError::new("host", FieldErrorReason::Invalid("bad IPv4 address"))
            })?)
        };
        Ok(HostAddr::new(ip, i32::from(port)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn display_and_parse() {
        let h: HostAddr = "1.2.3.4:10911".parse().unwrap();
        assert_eq!(
            h,
            HostAddr::new(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4)), 10911)
        );
        assert_eq!(h.to_string(), "1.2.3.4:10911");
        assert!(!h.is_v6());
        assert_eq!(h.encoded_len(), 8);
        let h6: HostAddr = "[::1]:10911".parse().unwrap();
        assert_eq!(h6.to_string(), "[::1]:10911");
        assert!(h6.is_v6());
        assert_eq!(h6.encoded_len(), 20);
        assert_eq!("[::1]:0".parse::<HostAddr>().unwrap().port, 0);
        assert_eq!("1.2.3.4:65535".parse::<HostAddr>().unwrap().port, 65535);
        for bad in [
            "1.2.3.4:65536",
            "1.2.3.4:-1",
            "1.2.3.4",
            "::1:80",
            "[::1:80",
            "[1.2.3.4]:80",
            "example.com:80",
            "",
            ":",
            "1.2.3.4:",
        ] {
            assert!(bad.parse::<HostAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ipv4_mapped_is_ipv4() {
        let v4 = HostAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)), 1234);
        let parsed: HostAddr = "[::ffff:10.0.0.7]:1234".parse().unwrap();
        assert_eq!(parsed, v4);
        assert_eq!(parsed.to_string(), "10.0.0.7:1234");
        let mapped = Ipv4Addr::new(10, 0, 0, 7).to_ipv6_mapped();
        assert_eq!(HostAddr::new(IpAddr::V6(mapped), 1234), v4);
        assert_eq!(
            HostAddr::from("[::ffff:10.0.0.7]:1234".parse::<SocketAddr>().unwrap()),
            v4
        );
        // Set directly (the field is public): still encoded as IPv4, 8 bytes, no IPv6 flag.
        let raw = HostAddr {
            ip: IpAddr::V6(mapped),
            port: 1234,
        };
        assert!(!raw.is_v6());
        assert_eq!(raw.encoded_len(), HOST_V4_LEN);
        assert_eq!(raw.to_bytes(), v4.to_bytes());
        // 16 bytes holding a mapped address decode as IPv4 (Java's InetAddress.getByAddress).
        let mut long = mapped.octets().to_vec();
        long.extend_from_slice(&1234i32.to_be_bytes());
        assert_eq!(HostAddr::decode_at(&long, 0, true), Some(v4));
        // Other IPv6 addresses stay IPv6 (IPv4-compatible `::a.b.c.d` included).
        let compat: HostAddr = "[::10.0.0.7]:1".parse().unwrap();
        assert!(compat.is_v6());
    }

    #[test]
    fn socket_addr() {
        let h = HostAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 80);
        assert_eq!(h.to_socket_addr().unwrap().to_string(), "127.0.0.1:80");
        assert_eq!(HostAddr::from(h.to_socket_addr().unwrap()), h);
        assert!(HostAddr::new(h.ip, -1).to_socket_addr().is_none());
        assert!(HostAddr::new(h.ip, 65536).to_socket_addr().is_none());
    }

    #[test]
    fn bytes_round_trip() {
        let h = HostAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 10911);
        let b = h.to_bytes();
        assert_eq!(b, [10, 0, 0, 1, 0, 0, 0x2A, 0x9F]);
        assert_eq!(HostAddr::decode_at(&b, 0, false), Some(h));
        assert_eq!(HostAddr::decode_at(&b, 1, false), None);
        let h6 = HostAddr::new("::1".parse().unwrap(), -5);
        let b6 = h6.to_bytes();
        assert_eq!(b6.len(), 20);
        assert_eq!(HostAddr::decode_at(&b6, 0, true), Some(h6));
        assert_eq!(
            HostAddr::decode_at(&b6, 0, false).map(|h| h.is_v6()),
            Some(false)
        );
    }
}

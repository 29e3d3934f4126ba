//! Body compression as a RocketMQ producer does it, and decompression as its consumers do.
//!
//! The store itself never compresses or decompresses (format §3.3): a record's BODY is stored
//! as given and its BODYCRC covers those stored bytes. A RocketMQ producer compresses a body of
//! at least `compressMsgBodyOverHowmuch` bytes (4096 by default) and marks the record with
//! SYSFLAG bit 0 plus the codec in bits 8-10; its consumers decompress such bodies. This module
//! is that producer and consumer step, for writers that act as a producer (bulk ingestion) and
//! for readers that hand bodies to users as a consumer would.
//!
//! | codec | SYSFLAG | stream format (what RocketMQ's `Compressor` classes write and read) |
//! |---|---|---|
//! | [`Compression::Lz4`] | `0x101` | LZ4 frame (`LZ4FrameOutputStream`: independent blocks, 4 MiB block maximum) |
//! | [`Compression::Zstd`] | `0x201` | Zstandard frame (`ZstdOutputStream`) |
//! | [`Compression::Zlib`] | `0x301` (`0x001`: legacy clients) | zlib stream (`Deflater`, with its header) |
//!
//! The decoders accept any valid stream of their format (dependent LZ4 blocks, block and
//! content checksums, concatenated and skippable frames) and never read out of bounds or panic
//! on bad input: they return [`CodecError`]. Output is bounded by a caller-given maximum, so a
//! small stored body cannot expand without limit.
//!
//! ```
//! use rocketstore::compression::{BodyCodec, Compression};
//!
//! let body = b"a compressible body, a compressible body, a compressible body".repeat(20);
//! let mut codec = BodyCodec::default();
//! let mut stored = Vec::new();
//! codec.compress(Compression::Lz4, 5, &body, &mut stored).unwrap();
//! assert!(stored.len() < body.len());
//! let sys_flag = Compression::Lz4.sys_flag();
//! assert_eq!(sys_flag, 0x101);
//!
//! let mut back = Vec::new();
//! let was_compressed = codec.decompress(sys_flag, &stored, 1 << 20, &mut back).unwrap();
//! assert!(was_compressed);
//! assert_eq!(back, body);
//! ```

use std::fmt;
use std::io::Read;
use std::str::FromStr;

use rocketstore_format::sysflag;

/// The default `compressLevel` of a RocketMQ producer (`rocketmq.message.compressLevel`).
pub const DEFAULT_LEVEL: i32 = 5;

/// The default `compressMsgBodyOverHowmuch` of a RocketMQ producer: bodies of at least this
/// many bytes are compressed.
pub const DEFAULT_COMPRESS_OVER: usize = 4096;

/// The default bound of a decompressed body (64 MiB).
pub const DEFAULT_MAX_DECOMPRESSED: usize = 64 << 20;

/// How a writer acting as a RocketMQ producer compresses bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressOptions {
    /// The codec (`rocketmq.message.compressType`; RocketMQ's default is zlib).
    pub codec: Compression,
    /// The level (`rocketmq.message.compressLevel`, default [`DEFAULT_LEVEL`]; zlib 0-9, zstd
    /// 1-22, ignored by LZ4).
    pub level: i32,
    /// Bodies of at least this many bytes are compressed (`compressMsgBodyOverHowmuch`,
    /// default [`DEFAULT_COMPRESS_OVER`]). A body whose compressed form is not smaller is
    /// stored as it is, without the flag (a RocketMQ producer would store the larger form).
    pub over: usize,
}

impl CompressOptions {
    /// `codec` with RocketMQ's default level and threshold.
    pub fn new(codec: Compression) -> Self {
        Self {
            codec,
            level: DEFAULT_LEVEL,
            over: DEFAULT_COMPRESS_OVER,
        }
    }

    /// Checks the level against the codec's range.
    ///
    /// # Errors
    /// [`CodecError::Level`].
    pub fn check(&self) -> Result<(), CodecError> {
        self.codec.check_level(self.level)
    }
}

/// A body codec RocketMQ defines (`CompressionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Compression {
    /// LZ4 frames (type 1).
    Lz4,
    /// Zstandard frames (type 2).
    Zstd,
    /// zlib streams (type 3; type 0 with bit 0 set is a legacy client's zlib).
    Zlib,
}

impl Compression {
    /// Every codec, in type order.
    pub const ALL: [Compression; 3] = [Compression::Lz4, Compression::Zstd, Compression::Zlib];

    /// The name used in options and errors: `lz4`, `zstd` or `zlib`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
            Compression::Zlib => "zlib",
        }
    }

    /// The compression type of SYSFLAG bits 8-10.
    pub fn type_value(self) -> i32 {
        match self {
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
            Compression::Zlib => 3,
        }
    }

    /// The SYSFLAG bits a producer sets on a body compressed with this codec:
    /// `COMPRESSED_FLAG | type << 8`.
    pub fn sys_flag(self) -> i32 {
        sysflag::COMPRESSED_FLAG | (self.type_value() << 8)
    }

    /// The codec of a record's SYSFLAG: `None` when bit 0 is clear (the body is stored as is).
    ///
    /// # Errors
    /// [`CodecError::UnknownType`] for compression types 4-7, which RocketMQ does not define.
    pub fn of_sys_flag(sys_flag: i32) -> Result<Option<Self>, CodecError> {
        if sys_flag & sysflag::COMPRESSED_FLAG == 0 {
            return Ok(None);
        }
        match sysflag::compression_type(sys_flag) {
            0 | 3 => Ok(Some(Compression::Zlib)),
            1 => Ok(Some(Compression::Lz4)),
            2 => Ok(Some(Compression::Zstd)),
            t => Err(CodecError::UnknownType(t)),
        }
    }

    /// Checks a compression level: 0-9 for zlib, 1-22 for zstd; LZ4 frames have one level
    /// (`LZ4FrameOutputStream` ignores it) and any value is accepted.
    ///
    /// # Errors
    /// [`CodecError::Level`] outside the range.
    pub fn check_level(self, level: i32) -> Result<(), CodecError> {
        let ok = match self {
            Compression::Lz4 => true,
            Compression::Zstd => (1..=22).contains(&level),
            Compression::Zlib => (0..=9).contains(&level),
        };
        if ok {
            Ok(())
        } else {
            Err(CodecError::Level {
                codec: self.name(),
                level,
            })
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = CodecError;

    /// `lz4`, `zstd` or `zlib` (any case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| CodecError::UnknownName(s.to_owned()))
    }
}

/// Why a body could not be compressed or decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// SYSFLAG names a compression type RocketMQ does not define.
    #[error("compression type {0} (SYSFLAG bits 8-10) is not one RocketMQ defines (0-3)")]
    UnknownType(i32),
    /// A codec name other than `lz4`, `zstd`, `zlib`.
    #[error("unknown compression {0:?} (expected \"lz4\", \"zstd\" or \"zlib\")")]
    UnknownName(String),
    /// A level outside the codec's range.
    #[error("compression level {level} is outside the range of {codec} (zlib 0-9, zstd 1-22)")]
    Level {
        /// The codec.
        codec: &'static str,
        /// The level given.
        level: i32,
    },
    /// The stored bytes are not a valid stream of the codec.
    #[error("the body is not valid {codec} data: {reason}")]
    Corrupt {
        /// The codec.
        codec: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The body decompresses to more than the allowed maximum.
    #[error("the {codec} body decompresses to more than {max} bytes")]
    TooLarge {
        /// The codec.
        codec: &'static str,
        /// The maximum.
        max: usize,
    },
    /// The encoder failed (it has no reason to for in-memory input).
    #[error("{codec} compression failed: {reason}")]
    Compress {
        /// The codec.
        codec: &'static str,
        /// The encoder's message.
        reason: String,
    },
}

fn corrupt(codec: Compression, reason: impl Into<String>) -> CodecError {
    CodecError::Corrupt {
        codec: codec.name(),
        reason: reason.into(),
    }
}

/// Compression and decompression state reused from body to body (zlib and zstd contexts, a
/// scratch buffer for LZ4 blocks). One per thread; cheap to create.
#[derive(Default)]
pub struct BodyCodec {
    zlib_compress: Option<(i32, flate2::Compress)>,
    zlib_decompress: Option<flate2::Decompress>,
    zstd_compress: Option<(i32, zstd::bulk::Compressor<'static>)>,
    block: Vec<u8>,
}

impl fmt::Debug for BodyCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyCodec").finish_non_exhaustive()
    }
}

// ---- LZ4 frame constants (lz4_Frame_format.md) ----
const LZ4_MAGIC: u32 = 0x184D_2204;
const LZ4_SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
const LZ4_SKIPPABLE: u32 = 0x184D_2A50;
/// Block maximum 4 MiB (BD = 7 << 4), as `LZ4FrameOutputStream`'s default.
const LZ4_BLOCK_MAX: usize = 4 << 20;
const LZ4_BD_4MB: u8 = 7 << 4;
/// Version 01, independent blocks; no block or content checksum, no content size.
const LZ4_FLG: u8 = 0b0110_0000;
const LZ4_UNCOMPRESSED_BIT: u32 = 0x8000_0000;

fn xxh32(data: &[u8]) -> u32 {
    twox_hash::XxHash32::oneshot(0, data)
}

impl BodyCodec {
    /// Compresses `body` with `codec` at `level` (see [`Compression::check_level`]) into `out`
    /// (cleared first).
    ///
    /// # Errors
    /// [`CodecError::Level`] for a level out of range.
    pub fn compress(
        &mut self,
        codec: Compression,
        level: i32,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        codec.check_level(level)?;
        out.clear();
        match codec {
            Compression::Lz4 => lz4_compress(body, out),
            Compression::Zstd => self.zstd_compress(level, body, out),
            Compression::Zlib => self.zlib_compress(level, body, out),
        }
    }

    /// Decompresses a stored body as a RocketMQ consumer does: if `sys_flag` marks it
    /// compressed, its decompressed bytes (at most `max` of them) are written to `out`
    /// (cleared first) and `true` is returned; otherwise `out` is left untouched and `false`
    /// is returned (the body is the message as is).
    ///
    /// # Errors
    /// [`CodecError::UnknownType`], [`CodecError::Corrupt`] or [`CodecError::TooLarge`].
    pub fn decompress(
        &mut self,
        sys_flag: i32,
        body: &[u8],
        max: usize,
        out: &mut Vec<u8>,
    ) -> Result<bool, CodecError> {
        let Some(codec) = Compression::of_sys_flag(sys_flag)? else {
            return Ok(false);
        };
        out.clear();
        match codec {
            Compression::Lz4 => self.lz4_decompress(body, max, out)?,
            Compression::Zstd => zstd_decompress(body, max, out)?,
            Compression::Zlib => self.zlib_decompress(body, max, out)?,
        }
        Ok(true)
    }

    fn zlib_compress(
        &mut self,
        level: i32,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let c = match &mut self.zlib_compress {
            Some((l, c)) if *l == level => {
                c.reset();
                c
            }
            slot => {
                let lvl = flate2::Compression::new(u32::try_from(level).unwrap_or(6));
                &mut slot.insert((level, flate2::Compress::new(lvl, true))).1
            }
        };
        out.reserve(body.len() + body.len() / 1000 + 64);
        loop {
            let consumed = usize::try_from(c.total_in()).unwrap_or(usize::MAX);
            let input = body.get(consumed..).unwrap_or_default();
            let status = c
                .compress_vec(input, out, flate2::FlushCompress::Finish)
                .map_err(|e| CodecError::Compress {
                    codec: "zlib",
                    reason: e.to_string(),
                })?;
            if status == flate2::Status::StreamEnd {
                return Ok(());
            }
            out.reserve(out.capacity().max(64));
        }
    }

    fn zlib_decompress(
        &mut self,
        body: &[u8],
        max: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let d = match &mut self.zlib_decompress {
            Some(d) => {
                d.reset(true);
                d
            }
            slot => slot.insert(flate2::Decompress::new(true)),
        };
        out.reserve(body.len().saturating_mul(4).min(max.saturating_add(1)));
        loop {
            let consumed = usize::try_from(d.total_in()).unwrap_or(usize::MAX);
            let input = body.get(consumed..).unwrap_or_default();
            let before = (d.total_in(), d.total_out());
            let status = d
                .decompress_vec(input, out, flate2::FlushDecompress::None)
                .map_err(|e| corrupt(Compression::Zlib, e.to_string()))?;
            if out.len() > max {
                return Err(CodecError::TooLarge { codec: "zlib", max });
            }
            if status == flate2::Status::StreamEnd {
                return Ok(());
            }
            if out.len() == out.capacity() {
                out.reserve(out.capacity().max(64).min(max.saturating_add(1)));
            } else if (d.total_in(), d.total_out()) == before {
                return Err(corrupt(Compression::Zlib, "the stream ends early"));
            }
        }
    }

    fn zstd_compress(
        &mut self,
        level: i32,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let err = |e: std::io::Error| CodecError::Compress {
            codec: "zstd",
            reason: e.to_string(),
        };
        let c = match &mut self.zstd_compress {
            Some((l, c)) if *l == level => c,
            slot => {
                let c = zstd::bulk::Compressor::new(level).map_err(err)?;
                &mut slot.insert((level, c)).1
            }
        };
        out.reserve(zstd::zstd_safe::compress_bound(body.len()));
        c.compress_to_buffer(body, out).map_err(err)?;
        Ok(())
    }

    fn lz4_decompress(
        &mut self,
        mut src: &[u8],
        max: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let bad = |reason: &str| corrupt(Compression::Lz4, reason);
        let take = |src: &mut &[u8], n: usize| -> Result<Vec<u8>, CodecError> {
            let (head, rest) = src
                .split_at_checked(n)
                .ok_or_else(|| bad("the frame ends early"))?;
            *src = rest;
            Ok(head.to_vec())
        };
        let u32_at = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let mut frames = 0;
        while !src.is_empty() || frames == 0 {
            let magic = u32_at(&take(&mut src, 4)?);
            if magic & LZ4_SKIPPABLE_MASK == LZ4_SKIPPABLE {
                let n = u32_at(&take(&mut src, 4)?) as usize;
                take(&mut src, n)?;
                continue;
            }
            if magic != LZ4_MAGIC {
                return Err(bad("no LZ4 frame magic number"));
            }
            frames += 1;
            let descriptor = take(&mut src, 2)?;
            let (flg, bd) = (descriptor[0], descriptor[1]);
            if flg >> 6 != 1 {
                return Err(bad("frame version is not 01"));
            }
            let block_checksum = flg & 0x10 != 0;
            let has_content_size = flg & 0x08 != 0;
            let content_checksum = flg & 0x04 != 0;
            let has_dict_id = flg & 0x01 != 0;
            let independent = flg & 0x20 != 0;
            let block_max = match (bd >> 4) & 0x7 {
                4 => 64 << 10,
                5 => 256 << 10,
                6 => 1 << 20,
                7 => 4 << 20,
                _ => return Err(bad("invalid block maximum size")),
            };
            let mut header = descriptor;
            if has_content_size {
                header.extend(take(&mut src, 8)?);
            }
            if has_dict_id {
                return Err(bad("frames with a dictionary id are not supported"));
            }
            let hc = take(&mut src, 1)?[0];
            if ((xxh32(&header) >> 8) & 0xFF) as u8 != hc {
                return Err(bad("frame header checksum mismatch"));
            }
            let frame_start = out.len();
            loop {
                let size = u32_at(&take(&mut src, 4)?);
                if size == 0 {
                    break;
                }
                let stored = size & LZ4_UNCOMPRESSED_BIT != 0;
                let n = (size & !LZ4_UNCOMPRESSED_BIT) as usize;
                let (data, rest) = src
                    .split_at_checked(n)
                    .ok_or_else(|| bad("a block ends early"))?;
                src = rest;
                if block_checksum {
                    let sum = u32_at(&take(&mut src, 4)?);
                    if sum != xxh32(data) {
                        return Err(bad("block checksum mismatch"));
                    }
                }
                if stored {
                    if n > block_max {
                        return Err(bad("a block is larger than the frame's block maximum"));
                    }
                    out.extend_from_slice(data);
                } else {
                    // An LZ4 sequence expands at most ~255x; the block maximum bounds it too.
                    let bound = block_max
                        .min(n.saturating_mul(255).saturating_add(16))
                        .min(max.saturating_sub(out.len()).saturating_add(1));
                    if self.block.len() < bound {
                        self.block.resize(bound, 0);
                    }
                    let dest = &mut self.block[..bound];
                    let produced = if independent {
                        lz4_flex::block::decompress_into(data, dest)
                    } else {
                        let dict_from = out.len().saturating_sub(64 << 10).max(frame_start);
                        lz4_flex::block::decompress_into_with_dict(data, dest, &out[dict_from..])
                    };
                    let produced = match produced {
                        Ok(p) => p,
                        Err(lz4_flex::block::DecompressError::OutputTooSmall { .. })
                            if bound < block_max =>
                        {
                            return Err(CodecError::TooLarge { codec: "lz4", max });
                        }
                        Err(e) => return Err(bad(&e.to_string())),
                    };
                    out.extend_from_slice(&self.block[..produced]);
                }
                if out.len() > max {
                    return Err(CodecError::TooLarge { codec: "lz4", max });
                }
            }
            if content_checksum {
                let sum = u32_at(&take(&mut src, 4)?);
                if sum != xxh32(&out[frame_start..]) {
                    return Err(bad("content checksum mismatch"));
                }
            }
            if has_content_size {
                let size = u64::from_le_bytes(header[2..10].try_into().unwrap_or([0; 8]));
                if size != (out.len() - frame_start) as u64 {
                    return Err(bad("content size mismatch"));
                }
            }
        }
        Ok(())
    }
}

/// One LZ4 frame as `LZ4FrameOutputStream` writes it: independent blocks of up to 4 MiB, each
/// stored uncompressed when compression does not shrink it, then the end mark.
fn lz4_compress(body: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
    out.reserve(body.len() + body.len() / 255 + 32);
    out.extend_from_slice(&LZ4_MAGIC.to_le_bytes());
    out.extend_from_slice(&[LZ4_FLG, LZ4_BD_4MB]);
    out.push(((xxh32(&[LZ4_FLG, LZ4_BD_4MB]) >> 8) & 0xFF) as u8);
    for chunk in body.chunks(LZ4_BLOCK_MAX) {
        let at = out.len();
        let bound = lz4_flex::block::get_maximum_output_size(chunk.len());
        out.resize(at + 4 + bound, 0);
        let n = lz4_flex::block::compress_into(chunk, &mut out[at + 4..]).map_err(|e| {
            CodecError::Compress {
                codec: "lz4",
                reason: e.to_string(),
            }
        })?;
        if n < chunk.len() {
            out.truncate(at + 4 + n);
            out[at..at + 4].copy_from_slice(&(n as u32).to_le_bytes());
        } else {
            out.truncate(at);
            out.extend_from_slice(&(chunk.len() as u32 | LZ4_UNCOMPRESSED_BIT).to_le_bytes());
            out.extend_from_slice(chunk);
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    Ok(())
}

fn zstd_decompress(body: &[u8], max: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
    let decoder = zstd::stream::read::Decoder::with_buffer(body)
        .map_err(|e| corrupt(Compression::Zstd, e.to_string()))?;
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    decoder
        .take(limit)
        .read_to_end(out)
        .map_err(|e| corrupt(Compression::Zstd, e.to_string()))?;
    if out.len() > max {
        return Err(CodecError::TooLarge { codec: "zstd", max });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| b"the quick brown fox jumps over the lazy dog "[(i * 7 + i / 13) % 44])
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let mut codec = BodyCodec::default();
        for c in Compression::ALL {
            for n in [0, 1, 100, 1024, 70_000] {
                let body = text(n);
                let mut stored = Vec::new();
                codec
                    .compress(c, DEFAULT_LEVEL, &body, &mut stored)
                    .unwrap();
                let mut back = Vec::new();
                assert!(codec
                    .decompress(c.sys_flag(), &stored, n, &mut back)
                    .unwrap());
                assert_eq!(back, body, "{c} at {n} bytes");
            }
        }
    }

    #[test]
    fn legacy_zlib_flag_and_plain_bodies() {
        let mut codec = BodyCodec::default();
        let mut stored = Vec::new();
        codec
            .compress(Compression::Zlib, 5, b"hello hello hello", &mut stored)
            .unwrap();
        let mut back = Vec::new();
        assert!(codec.decompress(0x1, &stored, 100, &mut back).unwrap());
        assert_eq!(back, b"hello hello hello");
        let mut untouched = b"x".to_vec();
        assert!(!codec
            .decompress(0x300, b"plain", 100, &mut untouched)
            .unwrap());
        assert_eq!(untouched, b"x");
        assert_eq!(
            codec.decompress(0x401, b"", 100, &mut back),
            Err(CodecError::UnknownType(4))
        );
    }

    #[test]
    fn output_is_bounded() {
        let mut codec = BodyCodec::default();
        let body = vec![0u8; 100_000];
        for c in Compression::ALL {
            let mut stored = Vec::new();
            codec
                .compress(c, DEFAULT_LEVEL, &body, &mut stored)
                .unwrap();
            let mut back = Vec::new();
            let got = codec.decompress(c.sys_flag(), &stored, 99_999, &mut back);
            assert!(
                matches!(got, Err(CodecError::TooLarge { max: 99_999, .. })),
                "{c}: {got:?}"
            );
        }
    }

    #[test]
    fn levels_and_names() {
        assert!(Compression::Zlib.check_level(10).is_err());
        assert!(Compression::Zstd.check_level(0).is_err());
        assert!(Compression::Lz4.check_level(99).is_ok());
        assert_eq!("ZSTD".parse::<Compression>(), Ok(Compression::Zstd));
        assert!("snappy".parse::<Compression>().is_err());
        assert_eq!(Compression::of_sys_flag(0x301), Ok(Some(Compression::Zlib)));
        assert_eq!(Compression::of_sys_flag(0x300), Ok(None));
    }

    /// A frame with dependent blocks, block checksums, a content size and a content checksum,
    /// built by hand from two blocks where the second refers back into the first.
    #[test]
    fn lz4_frame_features() {
        let first = text(300);
        let second = text(300);
        let b1 = lz4_flex::block::compress(&first);
        let b2 = lz4_flex::block::compress_with_dict(&second, &first);
        let flg = 0b0100_0000 | 0x10 | 0x08 | 0x04;
        let mut header = vec![flg, 4 << 4];
        header.extend_from_slice(&600u64.to_le_bytes());
        let mut f = LZ4_MAGIC.to_le_bytes().to_vec();
        f.extend_from_slice(&header);
        f.push(((xxh32(&header) >> 8) & 0xFF) as u8);
        for b in [&b1, &b2] {
            f.extend_from_slice(&(b.len() as u32).to_le_bytes());
            f.extend_from_slice(b);
            f.extend_from_slice(&xxh32(b).to_le_bytes());
        }
        f.extend_from_slice(&0u32.to_le_bytes());
        let whole = [first.clone(), second.clone()].concat();
        f.extend_from_slice(&xxh32(&whole).to_le_bytes());
        let mut codec = BodyCodec::default();
        let mut back = Vec::new();
        assert!(codec.decompress(0x101, &f, 1000, &mut back).unwrap());
        assert_eq!(back, whole);
        let mut bad = f.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(
            codec.decompress(0x101, &bad, 1000, &mut back),
            Err(CodecError::Corrupt { .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The decoders never panic, whatever the bytes; a truncated valid body is an error.
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600),
                                cut in 0usize..600, ty in 0i32..8) {
            let mut codec = BodyCodec::default();
            let mut out = Vec::new();
            let _ = codec.decompress(1 | (ty << 8), &bytes, 1 << 16, &mut out);
            for c in Compression::ALL {
                let mut stored = Vec::new();
                codec.compress(c, DEFAULT_LEVEL, &bytes, &mut stored).unwrap();
                let cut = cut.min(stored.len());
                if cut < stored.len() {
                    let _ = codec.decompress(c.sys_flag(), &stored[..cut], 1 << 16, &mut out);
                }
                // Flip one byte: an error or some output, never a panic.
                if !stored.is_empty() {
                    let i = cut % stored.len();
                    stored[i] ^= 0x5A;
                    let _ = codec.decompress(c.sys_flag(), &stored, 1 << 16, &mut out);
                }
            }
        }
    }
}

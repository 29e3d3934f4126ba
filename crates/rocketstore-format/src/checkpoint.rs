//! The 4096-byte `checkpoint` file (spec §7.1), plus rocketstore's extension in the unused tail.
//!
//! RocketMQ layout (big-endian i64s): physicMsgTimestamp @0, logicsMsgTimestamp @8,
//! indexMsgTimestamp @16, masterFlushedOffset @24 (5.0+), confirmPhyOffset @32 (5.1.1+); every
//! other byte is zero.
//!
//! Extension (ignored by RocketMQ, which never reads or writes past byte 40):
//!
//! | offset | width | field |
//! |---|---|---|
//! | 3928 | 16 | recovery window: boot id of the writer (flag bit 1) |
//! | 3944 | i64 | recovery window: start offset (flag bit 1) |
//! | 3952 | i64 | recovery window: index file name as a number, 0 = none (flag bit 1) |
//! | 3960 | u32 | recovery window: durable entry count of that index file (flag bit 1) |
//! | 3968 | 8 | magic `RSCKPT01` |
//! | 3976 | i64 | durable commit-log offset |
//! | 3984 | u64 | generation |
//! | 3992 | u32 | flags (bit 0: clean shutdown; bit 1: recovery window present; other bits 0) |
//! | 3996 | u32 | CRC-32 (IEEE, unmasked) of bytes `[0, 3996)` — covers the RocketMQ fields too |
//!
//! Without flag bit 1 the window bytes `[3928, 3964)` are zero. A decoder that does not know bit 1
//! refuses the extension (and so falls back to a full recovery scan), which is safe.
//!
//! The recovery window (see [`RecoveryWindow`]) lets abnormal recovery start a few seconds of
//! writes back instead of at the first commit log file.
//!
//! Bytes `[4000, 4096)` are zero. Decoding: if `[3968, 4000)` is all zero the file was written by
//! RocketMQ (no extension); if it starts with the magic the CRC must match; anything else is
//! damage. So any single damaged byte in `[0, 4000)` of a file with the extension is detected.

use crate::bytes::{array_at, i64_at, put_at, u32_at, u64_at};
use crate::consts::CHECKPOINT_FILE_SIZE;

/// Offset of the extension inside the checkpoint file.
pub const CHECKPOINT_EXT_OFFSET: usize = 3968;
/// Magic of the extension.
pub const CHECKPOINT_EXT_MAGIC: [u8; 8] = *b"RSCKPT01";
/// Offset of the extension's CRC field; the CRC covers `[0, CHECKPOINT_CRC_POS)`.
pub const CHECKPOINT_CRC_POS: usize = 3996;
/// End of the extension (end of the CRC field).
pub const CHECKPOINT_EXT_END: usize = 4000;
/// Flag bit: the store was shut down cleanly.
pub const CHECKPOINT_FLAG_CLEAN_SHUTDOWN: u32 = 1;
/// Flag bit: the recovery window fields are present.
pub const CHECKPOINT_FLAG_WINDOW: u32 = 2;
/// Offset of the recovery window fields.
pub const CHECKPOINT_WINDOW_OFFSET: usize = 3928;

/// The checkpoint file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Checkpoint {
    /// Store time of the last record known flushed in the commit log.
    pub physic_msg_timestamp: i64,
    /// Store time of the last record dispatched to a consume queue.
    pub logics_msg_timestamp: i64,
    /// End timestamp of the last full index file that was flushed.
    pub index_msg_timestamp: i64,
    /// HA master flushed offset (RocketMQ 5.0+).
    pub master_flushed_offset: i64,
    /// Confirm offset (RocketMQ 5.1.1+).
    pub confirm_phy_offset: i64,
    /// rocketstore's extension; `None` for a checkpoint written by RocketMQ.
    pub ext: Option<CheckpointExt>,
}

/// rocketstore's checkpoint extension.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CheckpointExt {
    /// Commit-log offset known durable (flushed) when the checkpoint was written.
    pub durable_commitlog_offset: i64,
    /// Whether the store was shut down cleanly.
    pub clean_shutdown: bool,
    /// Monotonic write counter.
    pub generation: u64,
    /// Where abnormal recovery may start, if recorded.
    pub window: Option<RecoveryWindow>,
}

/// How far consume queues and the index were durable when the checkpoint was written.
///
/// Invariants the writer keeps (what a reader may trust):
/// - every consume queue unit of every record below `start_offset` is durable, and
///   `start_offset` is a record boundary at or below the durable commit log offset;
/// - if `index_file != 0`: the index file of that name holds `index_count` durable entries
///   (entry 0 unused), every older index file is entirely durable, and every record below
///   `start_offset` has all its index entries in those entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RecoveryWindow {
    /// `/proc/sys/kernel/random/boot_id` of the writer (zero if unknown): when it equals the
    /// reader's, the page cache survived (a process crash, not a power loss) and every byte the
    /// writer put into a mapping is still there.
    pub boot_id: [u8; 16],
    /// Commit log offset where abnormal recovery starts its walk.
    pub start_offset: i64,
    /// Name of the index file holding the durable index mark, as a number (0: none).
    pub index_file: i64,
    /// Durable `indexCount` of that file.
    pub index_count: u32,
}

/// Errors of [`Checkpoint::decode`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The buffer is not exactly 4096 bytes.
    #[error("checkpoint is {len} bytes, expected 4096")]
    BadLength {
        /// Actual length.
        len: usize,
    },
    /// The extension magic is present but the CRC does not match: a torn or damaged write.
    #[error("checkpoint CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Torn {
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// The extension area is not zero but does not start with the magic: damage or a foreign
    /// writer.
    #[error("checkpoint extension area holds unknown data (magic {magic:02x?})")]
    UnknownExt {
        /// The 8 bytes found where the magic belongs.
        magic: [u8; 8],
    },
    /// The extension is intact but has flag bits this version does not know.
    #[error("checkpoint extension has unknown flags {flags:#x}")]
    UnknownExtFlags {
        /// The stored flags.
        flags: u32,
    },
}

impl Checkpoint {
    /// The 4096 bytes of the file.
    pub fn encode(&self) -> [u8; CHECKPOINT_FILE_SIZE] {
        let mut out = [0u8; CHECKPOINT_FILE_SIZE];
        // All positions are constants well inside the 4096-byte array, so the writes cannot fail.
        let _ = self.write(&mut out);
        out
    }

    fn write(&self, out: &mut [u8; CHECKPOINT_FILE_SIZE]) -> Option<()> {
        put_at(out, 0, &self.physic_msg_timestamp.to_be_bytes())?;
        put_at(out, 8, &self.logics_msg_timestamp.to_be_bytes())?;
        put_at(out, 16, &self.index_msg_timestamp.to_be_bytes())?;
        put_at(out, 24, &self.master_flushed_offset.to_be_bytes())?;
        put_at(out, 32, &self.confirm_phy_offset.to_be_bytes())?;
        if let Some(ext) = self.ext {
            let mut flags = if ext.clean_shutdown {
                CHECKPOINT_FLAG_CLEAN_SHUTDOWN
            } else {
                0
            };
            if let Some(w) = ext.window {
                flags |= CHECKPOINT_FLAG_WINDOW;
                put_at(out, CHECKPOINT_WINDOW_OFFSET, &w.boot_id)?;
                put_at(out, 3944, &w.start_offset.to_be_bytes())?;
                put_at(out, 3952, &w.index_file.to_be_bytes())?;
                put_at(out, 3960, &w.index_count.to_be_bytes())?;
            }
            put_at(out, CHECKPOINT_EXT_OFFSET, &CHECKPOINT_EXT_MAGIC)?;
            put_at(out, 3976, &ext.durable_commitlog_offset.to_be_bytes())?;
            put_at(out, 3984, &ext.generation.to_be_bytes())?;
            put_at(out, 3992, &flags.to_be_bytes())?;
            let crc = crc32fast::hash(out.get(..CHECKPOINT_CRC_POS)?);
            put_at(out, CHECKPOINT_CRC_POS, &crc.to_be_bytes())?;
        }
        Some(())
    }

    /// Decodes a checkpoint file.
    ///
    /// # Errors
    /// [`CheckpointError::BadLength`] unless `b` is 4096 bytes; [`CheckpointError::Torn`] if the
    /// extension's CRC fails; [`CheckpointError::UnknownExt`] if the extension area is neither
    /// zero nor starts with the magic; [`CheckpointError::UnknownExtFlags`].
    pub fn decode(b: &[u8]) -> Result<Checkpoint, CheckpointError> {
        let bad_len = CheckpointError::BadLength { len: b.len() };
        if b.len() != CHECKPOINT_FILE_SIZE {
            return Err(bad_len);
        }
        let rd = |pos| i64_at(b, pos).ok_or(CheckpointError::BadLength { len: b.len() });
        let mut cp = Checkpoint {
            physic_msg_timestamp: rd(0)?,
            logics_msg_timestamp: rd(8)?,
            index_msg_timestamp: rd(16)?,
            master_flushed_offset: rd(24)?,
            confirm_phy_offset: rd(32)?,
            ext: None,
        };
        let area = b
            .get(CHECKPOINT_EXT_OFFSET..CHECKPOINT_EXT_END)
            .ok_or(bad_len.clone())?;
        if area.iter().all(|&x| x == 0) {
            return Ok(cp);
        }
        let magic: [u8; 8] = array_at(b, CHECKPOINT_EXT_OFFSET).ok_or(bad_len.clone())?;
        if magic != CHECKPOINT_EXT_MAGIC {
            return Err(CheckpointError::UnknownExt { magic });
        }
        let stored = u32_at(b, CHECKPOINT_CRC_POS).ok_or(bad_len.clone())?;
        let computed = crc32fast::hash(b.get(..CHECKPOINT_CRC_POS).ok_or(bad_len.clone())?);
        if stored != computed {
            return Err(CheckpointError::Torn { stored, computed });
        }
        let flags = u32_at(b, 3992).ok_or(bad_len.clone())?;
        if flags & !(CHECKPOINT_FLAG_CLEAN_SHUTDOWN | CHECKPOINT_FLAG_WINDOW) != 0 {
            return Err(CheckpointError::UnknownExtFlags { flags });
        }
        let window = if flags & CHECKPOINT_FLAG_WINDOW != 0 {
            Some(RecoveryWindow {
                boot_id: array_at(b, CHECKPOINT_WINDOW_OFFSET).ok_or(bad_len.clone())?,
                start_offset: rd(3944)?,
                index_file: rd(3952)?,
                index_count: u32_at(b, 3960).ok_or(bad_len.clone())?,
            })
        } else {
            None
        };
        cp.ext = Some(CheckpointExt {
            durable_commitlog_offset: rd(3976)?,
            generation: u64_at(b, 3984).ok_or(bad_len)?,
            clean_shutdown: flags & CHECKPOINT_FLAG_CLEAN_SHUTDOWN != 0,
            window,
        });
        Ok(cp)
    }

    /// RocketMQ `getMinTimestamp()`: `max(0, min(physic, logics) - 3000)` (saturating instead of
    /// Java's wrap-around for absurd values).
    pub fn min_timestamp(&self) -> i64 {
        self.physic_msg_timestamp
            .min(self.logics_msg_timestamp)
            .saturating_sub(3000)
            .max(0)
    }

    /// RocketMQ `getMinTimestampIndex()`: `min(min_timestamp(), index_msg_timestamp)`.
    pub fn min_timestamp_index(&self) -> i64 {
        self.min_timestamp().min(self.index_msg_timestamp)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn vector_16_checkpoint_bytes() {
        let cp = Checkpoint {
            physic_msg_timestamp: 1_700_000_000_500,
            logics_msg_timestamp: 1_700_000_000_400,
            index_msg_timestamp: 1_699_999_990_000,
            ..Checkpoint::default()
        };
        let b = cp.encode();
        assert_eq!(b.len(), 4096);
        assert_eq!(b[0..8], [0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x69, 0xF4]);
        assert_eq!(b[8..16], [0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x69, 0x90]);
        assert_eq!(b[16..24], [0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x40, 0xF0]);
        assert!(b[24..].iter().all(|&x| x == 0));
        assert_eq!(cp.min_timestamp(), 1_699_999_997_400);
        assert_eq!(cp.min_timestamp_index(), 1_699_999_990_000);
        assert_eq!(Checkpoint::decode(&b), Ok(cp));
    }

    #[test]
    fn min_timestamp_edges() {
        assert_eq!(Checkpoint::default().min_timestamp(), 0);
        let cp = Checkpoint {
            physic_msg_timestamp: i64::MIN,
            logics_msg_timestamp: 5,
            ..Checkpoint::default()
        };
        assert_eq!(cp.min_timestamp(), 0);
        let cp = Checkpoint {
            physic_msg_timestamp: 10_000,
            logics_msg_timestamp: 20_000,
            index_msg_timestamp: 50_000,
            ..Checkpoint::default()
        };
        assert_eq!(cp.min_timestamp(), 7_000);
        assert_eq!(cp.min_timestamp_index(), 7_000);
    }

    #[test]
    fn extension_round_trip_and_damage() {
        let cp = Checkpoint {
            physic_msg_timestamp: 1,
            logics_msg_timestamp: 2,
            index_msg_timestamp: 3,
            master_flushed_offset: 4,
            confirm_phy_offset: 5,
            ext: Some(CheckpointExt {
                durable_commitlog_offset: 6,
                clean_shutdown: true,
                generation: 7,
                window: Some(RecoveryWindow {
                    boot_id: [9; 16],
                    start_offset: 10,
                    index_file: 20_231_231_235_959_999,
                    index_count: 11,
                }),
            }),
        };
        let b = cp.encode();
        assert_eq!(b[3968..3976], *b"RSCKPT01");
        assert!(b[CHECKPOINT_EXT_END..].iter().all(|&x| x == 0));
        assert_eq!(Checkpoint::decode(&b), Ok(cp));
        // Every single damaged byte in [0, 4000) is detected.
        for pos in 0..CHECKPOINT_EXT_END {
            let mut d = b;
            d[pos] ^= 0x5A;
            assert!(Checkpoint::decode(&d).is_err(), "byte {pos}");
        }
        // The tail beyond the extension is not covered.
        let mut d = b;
        d[4095] = 1;
        assert_eq!(Checkpoint::decode(&d), Ok(cp));
        // Wrong lengths.
        assert_eq!(
            Checkpoint::decode(&b[..4095]),
            Err(CheckpointError::BadLength { len: 4095 })
        );
        assert_eq!(
            Checkpoint::decode(&[]),
            Err(CheckpointError::BadLength { len: 0 })
        );
        // Without the window flag the window bytes stay zero.
        let mut no_window = cp;
        if let Some(e) = no_window.ext.as_mut() {
            e.window = None;
        }
        let nb = no_window.encode();
        assert!(nb[CHECKPOINT_WINDOW_OFFSET..3968].iter().all(|&x| x == 0));
        assert_eq!(Checkpoint::decode(&nb), Ok(no_window));
        // Unknown flags with a valid CRC.
        let mut d = b;
        d[3992..3996].copy_from_slice(&7u32.to_be_bytes());
        let crc = crc32fast::hash(&d[..CHECKPOINT_CRC_POS]);
        d[CHECKPOINT_CRC_POS..CHECKPOINT_EXT_END].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            Checkpoint::decode(&d),
            Err(CheckpointError::UnknownExtFlags { flags: 7 })
        );
        // Garbage in the extension area.
        let mut d = Checkpoint::default().encode();
        d[3999] = 1;
        assert!(matches!(
            Checkpoint::decode(&d),
            Err(CheckpointError::UnknownExt { .. })
        ));
    }

    #[test]
    fn rocketmq_4x_checkpoint() {
        // 4.x writes only the first 24 bytes.
        let mut b = [0u8; 4096];
        b[0..8].copy_from_slice(&100i64.to_be_bytes());
        b[8..16].copy_from_slice(&200i64.to_be_bytes());
        let cp = Checkpoint::decode(&b).unwrap();
        assert_eq!(cp.physic_msg_timestamp, 100);
        assert_eq!(cp.logics_msg_timestamp, 200);
        assert_eq!(cp.ext, None);
    }
}

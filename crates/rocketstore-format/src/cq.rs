//! Consume-queue units (spec §5.1, §5.3) and the CQ tagsCode rules (§5.2).

use crate::bytes::{i32_at, i64_at};
use crate::consts::{property, CQ_STORE_UNIT_SIZE, SCHEDULE_TOPIC};
use crate::error::{FieldError, FieldErrorReason};
use crate::hash::tags_code;
use crate::properties::Properties;

/// One 20-byte consume-queue unit: commit-log offset (i64), record TOTALSIZE (i32), tagsCode (i64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CqUnit {
    /// PHYSICALOFFSET of the record.
    pub phy_offset: i64,
    /// TOTALSIZE of the record (not the body length).
    pub size: i32,
    /// tagsCode (§5.2), or a ConsumeQueueExt address ([`is_ext_addr`]).
    pub tags_code: i64,
}

impl CqUnit {
    /// The pre-fill ("blank") unit written before the first real unit of a queue that starts at a
    /// non-zero offset (§5.3): `00×8 | 7F FF FF FF | 00×8`.
    pub const PREFILL: CqUnit = CqUnit {
        phy_offset: 0,
        size: i32::MAX,
        tags_code: 0,
    };

    /// The 20 bytes of this unit.
    pub fn encode(&self) -> [u8; CQ_STORE_UNIT_SIZE] {
        let mut out = [0u8; CQ_STORE_UNIT_SIZE];
        out[..8].copy_from_slice(&self.phy_offset.to_be_bytes());
        out[8..12].copy_from_slice(&self.size.to_be_bytes());
        out[12..].copy_from_slice(&self.tags_code.to_be_bytes());
        out
    }

    /// Decodes the first 20 bytes of `b`; `None` if `b` is shorter.
    pub fn decode(b: &[u8]) -> Option<CqUnit> {
        Some(CqUnit {
            phy_offset: i64_at(b, 0)?,
            size: i32_at(b, 8)?,
            tags_code: i64_at(b, 12)?,
        })
    }

    /// RocketMQ's recovery test (§5.5): `phy_offset >= 0 && size > 0`. The first invalid unit
    /// (normally all zeros) ends a queue. Pre-fill units are valid.
    pub fn is_valid(&self) -> bool {
        self.phy_offset >= 0 && self.size > 0
    }

    /// Whether this is exactly [`CqUnit::PREFILL`].
    pub fn is_prefill(&self) -> bool {
        *self == CqUnit::PREFILL
    }
}

/// Whether a tagsCode is a ConsumeQueueExt address (`<= Integer.MIN_VALUE - 1`, §5.2).
pub fn is_ext_addr(tags_code: i64) -> bool {
    tags_code < i64::from(i32::MIN)
}

/// Parses a `messageDelayLevel` table such as [`crate::DEFAULT_MESSAGE_DELAY_LEVEL`]
/// (`"1s 5s ... 2h"`) into milliseconds; index 0 is level 1. Tokens are separated by ASCII
/// whitespace; each is a non-negative decimal followed by one unit: `s` (1000), `m` (60000),
/// `h` (3600000) or `d` (86400000).
///
/// # Errors
/// [`FieldError`] with field `"delay table"`: empty table, unknown unit, bad number, overflow.
pub fn delay_levels(spec: &str) -> Result<Vec<i64>, FieldError> {
    let err = |reason| FieldError::new("delay table", reason);
    let mut levels = Vec::new();
    for token in spec.split_ascii_whitespace() {
        let unit_ms: i64 = match token.as_bytes().last() {
            Some(b's') => 1_000,
            Some(b'm') => 60_000,
            Some(b'h') => 3_600_000,
            Some(b'd') => 86_400_000,
            _ => return Err(err(FieldErrorReason::Invalid("unknown time unit"))),
        };
        let digits = token.get(..token.len() - 1).unwrap_or("");
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err(FieldErrorReason::NotAnInteger));
        }
        let n: i64 = digits
            .parse()
            .map_err(|_| err(FieldErrorReason::NotAnInteger))?;
        let ms = n.checked_mul(unit_ms).ok_or(err(FieldErrorReason::Invalid(
            "delay overflows i64 milliseconds",
        )))?;
        levels.push(ms);
    }
    if levels.is_empty() {
        return Err(err(FieldErrorReason::Empty));
    }
    Ok(levels)
}

/// The CQ tagsCode of a record (§5.2, RocketMQ `checkMessageAndReturnSize`):
///
/// * start with [`tags_code`] of `TAGS` (0 if absent or empty);
/// * if `topic` is [`SCHEDULE_TOPIC`] and `DELAY` is present: parse it as a Java int, clamp it to
///   `levels.len()` (the max delay level); if the level is > 0 the tagsCode is the deliver time
///   `store_timestamp + levels[level - 1]` (`store_timestamp + 1000` if the level has no entry).
///
/// `levels` comes from [`delay_levels`]. Additions wrap like Java `long`.
///
/// # Errors
/// [`FieldError`] with field `"delay level"` if `DELAY` is not an integer (RocketMQ fails the
/// record's validation in that case). `DELAY` is only looked at on the schedule topic.
pub fn cq_tags_code(
    topic: &str,
    store_timestamp: i64,
    props: &Properties,
    levels: &[i64],
) -> Result<i64, FieldError> {
    let mut code = tags_code(props.tags());
    if topic == SCHEDULE_TOPIC {
        if let Some(delay) = props.get(property::DELAY) {
            let mut level = parse_java_int(delay).ok_or(FieldError::new(
                "delay level",
                FieldErrorReason::NotAnInteger,
            ))?;
            let max_level = i32::try_from(levels.len()).unwrap_or(i32::MAX);
            if level > max_level {
                level = max_level;
            }
            if level > 0 {
                let delay_ms = usize::try_from(level - 1)
                    .ok()
                    .and_then(|i| levels.get(i))
                    .copied()
                    .unwrap_or(1_000);
                code = store_timestamp.wrapping_add(delay_ms);
            }
        }
    }
    Ok(code)
}

/// Java `Integer.parseInt(s)` (radix 10): optional `+`/`-`, then ASCII digits, no whitespace.
fn parse_java_int(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    use super::*;
    use crate::consts::DEFAULT_MESSAGE_DELAY_LEVEL;

    #[test]
    fn vector_12_cq_entry() {
        let unit = CqUnit {
            phy_offset: 1_073_741_824,
            size: 124,
            tags_code: tags_code(Some("TagA")),
        };
        let bytes = unit.encode();
        assert_eq!(
            bytes,
            [0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0x7C, 0, 0, 0, 0, 0, 0x27, 0xA8, 0x07]
        );
        assert_eq!(CqUnit::decode(&bytes), Some(unit));
        assert!(unit.is_valid());
        assert!(!unit.is_prefill());
    }

    #[test]
    fn vector_12_prefill() {
        // A queue whose first message has offset 3: three blank units at 0, 20, 40, then the real
        // one at 60; min = 3, max = 4.
        let mut queue = Vec::new();
        for _ in 0..3 {
            queue.extend_from_slice(&CqUnit::PREFILL.encode());
        }
        let real = CqUnit {
            phy_offset: 0,
            size: 92,
            tags_code: 0,
        };
        queue.extend_from_slice(&real.encode());
        let expected_blank = [
            0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        for pos in [0, 20, 40] {
            assert_eq!(queue[pos..pos + 20], expected_blank);
            let u = CqUnit::decode(&queue[pos..]).unwrap();
            assert!(u.is_prefill());
            assert!(u.is_valid());
        }
        assert_eq!(CqUnit::decode(&queue[60..]), Some(real));
        let min = 60 / CQ_STORE_UNIT_SIZE;
        let max = queue.len() / CQ_STORE_UNIT_SIZE;
        assert_eq!((min, max), (3, 4));
    }

    #[test]
    fn decode_bounds_and_validity() {
        assert_eq!(CqUnit::decode(&[0u8; 19]), None);
        assert_eq!(CqUnit::decode(&[0u8; 25]), Some(CqUnit::default()));
        assert!(!CqUnit::default().is_valid());
        assert!(!CqUnit {
            phy_offset: -1,
            size: 5,
            tags_code: 0
        }
        .is_valid());
        assert!(is_ext_addr(-2_147_483_649));
        assert!(!is_ext_addr(-2_147_483_648));
        assert!(!is_ext_addr(tags_code(Some("TAG-中文"))));
    }

    #[test]
    fn delay_table() {
        let levels = delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL).unwrap();
        assert_eq!(levels.len(), 18);
        assert_eq!(levels[0], 1_000);
        assert_eq!(levels[2], 10_000);
        assert_eq!(levels[17], 7_200_000);
        assert_eq!(delay_levels("1d").unwrap(), vec![86_400_000]);
        for bad in [
            "",
            "  ",
            "1x",
            "s",
            "-1s",
            "1.5s",
            "99999999999999999999s",
            "9999999999999999d",
        ] {
            assert!(delay_levels(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn vector_13_delay_tags_code() {
        let levels = delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL).unwrap();
        let ts = 1_700_000_000_000;
        let mut props: Properties = [
            ("DELAY", "3"),
            ("TAGS", "TagA"),
            ("REAL_TOPIC", "TopicTest"),
            ("REAL_QID", "0"),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            cq_tags_code(SCHEDULE_TOPIC, ts, &props, &levels).unwrap(),
            1_700_000_010_000
        );
        // queueId of the schedule record is level - 1.
        let level: i32 = props.get("DELAY").unwrap().parse().unwrap();
        assert_eq!(level - 1, 2);
        // Level 20 is clamped to 18 (2 h).
        props.insert("DELAY", "20");
        assert_eq!(
            cq_tags_code(SCHEDULE_TOPIC, ts, &props, &levels).unwrap(),
            ts + 7_200_000
        );
        // Level <= 0 keeps the TAGS hash.
        props.insert("DELAY", "0");
        assert_eq!(
            cq_tags_code(SCHEDULE_TOPIC, ts, &props, &levels).unwrap(),
            2_598_919
        );
        props.insert("DELAY", "-4");
        assert_eq!(
            cq_tags_code(SCHEDULE_TOPIC, ts, &props, &levels).unwrap(),
            2_598_919
        );
        props.insert("DELAY", "+2");
        assert_eq!(
            cq_tags_code(SCHEDULE_TOPIC, ts, &props, &levels).unwrap(),
            ts + 5_000
        );
        // The re-delivered record keeps DELAY / REAL_TOPIC / REAL_QID, but off the schedule
        // topic the delay rule does not fire.
        props.insert("DELAY", "3");
        assert_eq!(
            cq_tags_code("TopicTest", ts, &props, &levels).unwrap(),
            2_598_919
        );
        // A non-integer DELAY fails validation (on the schedule topic only).
        for bad in ["x", "", " 3", "3 ", "99999999999"] {
            props.insert("DELAY", bad);
            assert!(
                cq_tags_code(SCHEDULE_TOPIC, ts, &props, &levels).is_err(),
                "{bad:?}"
            );
            assert!(cq_tags_code("TopicTest", ts, &props, &levels).is_ok());
        }
        // No DELAY: TAGS hash; nothing at all: 0.
        assert_eq!(
            cq_tags_code(SCHEDULE_TOPIC, ts, &Properties::new(), &levels).unwrap(),
            0
        );
        // An empty level table clamps every level to 0.
        props.insert("DELAY", "3");
        assert_eq!(
            cq_tags_code(SCHEDULE_TOPIC, ts, &props, &[]).unwrap(),
            2_598_919
        );
    }
}

//! Input validation and preparation of messages, before anything is written.
//!
//! Every rule here runs outside the put lock; a batch is checked whole, so an invalid message
//! anywhere in it means nothing of it reaches the disk.

use std::sync::atomic::{AtomicU16, Ordering};

use rocketstore_format::{
    property, record_len, validate_property, validate_topic, HostAddr, MessageVersion,
    RecordHeader, UniqKeyPrefix, MAX_PROPERTIES_LEN, MAX_TOPIC_LEN_V1,
};

use crate::commitlog::Prepared;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::message::PutMessage;
use crate::util::now_ms;

/// Generates `UNIQ_KEY`s laid out like RocketMQ's `MessageClientIDSetter` (§4.2): address,
/// process id, a per-process random value, milliseconds since the start of the month (UTC here)
/// and a counter.
#[derive(Debug)]
pub(crate) struct UniqKeyGen {
    #[cfg_attr(not(test), allow(dead_code))]
    prefix: UniqKeyPrefix,
    /// The fixed part, already in uppercase hex.
    prefix_hex: Vec<u8>,
    counter: AtomicU16,
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for b in bytes {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
}

impl UniqKeyGen {
    pub(crate) fn new(host: &HostAddr) -> Self {
        let pid = std::process::id();
        let seed = (now_ms() as u64 ^ (u64::from(pid) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let prefix = UniqKeyPrefix {
            ip: host.ip,
            pid: pid as i16,
            class_loader_hash: (seed >> 32) as i32,
        };
        let mut raw = Vec::with_capacity(22);
        match prefix.ip {
            std::net::IpAddr::V4(a) => raw.extend_from_slice(&a.octets()),
            std::net::IpAddr::V6(a) => raw.extend_from_slice(&a.octets()),
        }
        raw.extend_from_slice(&prefix.pid.to_be_bytes());
        raw.extend_from_slice(&prefix.class_loader_hash.to_be_bytes());
        let mut prefix_hex = Vec::with_capacity(44);
        push_hex(&mut prefix_hex, &raw);
        Self {
            prefix,
            prefix_hex,
            counter: AtomicU16::new(seed as u16),
        }
    }

    /// Appends the next key (uppercase hex, the layout of `rocketstore_format::uniq_key`).
    pub(crate) fn next_into(&self, now: i64, out: &mut Vec<u8>) {
        let since = (now - month_start_utc(now)) as i32;
        let c = self.counter.fetch_add(1, Ordering::Relaxed);
        out.extend_from_slice(&self.prefix_hex);
        push_hex(out, &since.to_be_bytes());
        push_hex(out, &c.to_be_bytes());
    }

    #[cfg(test)]
    pub(crate) fn prefix(&self) -> UniqKeyPrefix {
        self.prefix
    }
}

/// Epoch ms of the first instant of the UTC month containing `ms`.
fn month_start_utc(ms: i64) -> i64 {
    let days = ms.div_euclid(86_400_000);
    // Howard Hinnant's civil_from_days / days_from_civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day_of_month = doy - (153 * mp + 2) / 5; // 0-based
    (days - day_of_month) * 86_400_000
}

fn field_err(field: &'static str, index: Option<usize>, e: impl std::fmt::Display) -> Error {
    // A FieldError's Display already names its field ("invalid topic: ..."); keep the reason.
    let text = e.to_string();
    let e = text
        .strip_prefix("invalid ")
        .and_then(|t| t.split_once(": "))
        .map_or(text.as_str(), |(_, r)| r);
    match index {
        Some(i) => Error::invalid(field, format!("message {i}: {e}")),
        None => Error::invalid(field, e.to_string()),
    }
}

/// An upper estimate of the encoded properties [`prepare`] appends for `m`, so that a batch's
/// shared properties buffer is allocated once: growing it copies everything written so far
/// into fresh pages (with ~72-byte properties per message, a `64 * n` buffer always grew).
/// Covers UNIQ_KEY (IPv6 form), the TAGS and KEYS names and separators and `__CRC32#` in the
/// constant; the delayed-message properties by the topic length.
pub(crate) fn props_capacity(m: &PutMessage<'_>) -> usize {
    let mut n = 112 + m.uniq_key.map_or(0, str::len) + m.tags.map_or(0, str::len);
    n += m.keys.iter().map(|k| k.len() + 1).sum::<usize>();
    n += m.producer_group.map_or(0, |g| g.len() + 24);
    n += m
        .properties
        .iter()
        .map(|(k, v)| k.len() + v.len() + 2)
        .sum::<usize>();
    if m.delay_level > 0 {
        n += m.topic.len() + 48;
    }
    n
}

/// What preparing a batch's messages needs from the store, the same for every message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrepareCtx<'s> {
    pub(crate) cfg: &'s StoreConfig,
    /// The commit log's file size (no record may be larger).
    pub(crate) file_size: u64,
    pub(crate) uniq: &'s UniqKeyGen,
    /// The batch's clock (ms), for generated UNIQ_KEYs.
    pub(crate) now: i64,
}

/// Checks one message and appends its encoded properties to `props`. `index` is the message's
/// place in its batch (named in errors); `topic_checked` skips the topic check when the
/// previous message of the batch had the same topic.
pub(crate) fn prepare<'a>(
    m: &PutMessage<'a>,
    index: Option<usize>,
    topic_checked: bool,
    ctx: &PrepareCtx<'_>,
    props: &mut Vec<u8>,
) -> Result<Prepared<'a>> {
    let PrepareCtx {
        cfg,
        file_size,
        uniq,
        now,
    } = *ctx;
    if !topic_checked {
        validate_topic(m.topic).map_err(|e| field_err("topic", index, e))?;
    }
    if m.topic.len() > MAX_TOPIC_LEN_V1 && !cfg.auto_message_version_on_topic_len {
        return Err(field_err(
            "topic",
            index,
            format!(
                "is {} bytes; topics over 127 bytes need auto_message_version_on_topic_len",
                m.topic.len()
            ),
        ));
    }
    if m.queue_id < 0 || m.queue_id as u64 >= cfg.max_queue_nums_per_topic {
        return Err(field_err(
            "queue_id",
            index,
            format!(
                "{} is outside 0..{} (max_queue_nums_per_topic)",
                m.queue_id, cfg.max_queue_nums_per_topic
            ),
        ));
    }
    if m.delay_level < 0 {
        return Err(field_err("delay_level", index, "must not be negative"));
    }
    let tx = rocketstore_format::sysflag::transaction_type(m.transaction.sys_flag());
    let delayed = m.delay_level > 0
        && (tx == rocketstore_format::sysflag::TRANSACTION_NOT_TYPE
            || tx == rocketstore_format::sysflag::TRANSACTION_COMMIT_TYPE);
    // The level table is parsed only for delayed messages.
    let level = if delayed {
        m.delay_level.min(cfg.delay_levels().len() as i32)
    } else {
        0
    };
    if m.body.len() as u64 > cfg.max_message_size {
        return Err(Error::MessageTooLarge {
            field: "body",
            size: m.body.len(),
            max: cfg.max_message_size as usize,
            index,
        });
    }
    if m.reconsume_times < 0 {
        return Err(field_err("reconsume_times", index, "must not be negative"));
    }
    let start = props.len();
    let push = |props: &mut Vec<u8>, k: &str, v: &str| {
        props.extend_from_slice(k.as_bytes());
        props.push(rocketstore_format::NAME_VALUE_SEPARATOR);
        props.extend_from_slice(v.as_bytes());
        props.push(rocketstore_format::PROPERTY_SEPARATOR);
    };
    let result = (|| {
        match m.uniq_key {
            Some(u) => {
                validate_property(property::UNIQ_KEY, u)
                    .map_err(|e| field_err("uniq_key", index, e))?;
                push(props, property::UNIQ_KEY, u);
            }
            None if cfg.auto_uniq_key => {
                props.extend_from_slice(property::UNIQ_KEY.as_bytes());
                props.push(rocketstore_format::NAME_VALUE_SEPARATOR);
                uniq.next_into(now, props);
                props.push(rocketstore_format::PROPERTY_SEPARATOR);
            }
            None => {}
        }
        if let Some(t) = m.tags {
            validate_property(property::TAGS, t).map_err(|e| field_err("tags", index, e))?;
            push(props, property::TAGS, t);
        }
        if !m.keys.is_empty() {
            // The one KEYS rule (rocketstore_format::keys): parts joined with one space.
            let name_at = props.len();
            props.extend_from_slice(property::KEYS.as_bytes());
            props.push(rocketstore_format::NAME_VALUE_SEPARATOR);
            match rocketstore_format::keys::push_keys_value(m.keys, props) {
                Ok(0) => props.truncate(name_at),
                Ok(_) => props.push(rocketstore_format::PROPERTY_SEPARATOR),
                Err(e) => {
                    props.truncate(name_at);
                    return Err(match m.keys.iter().find(|k| k.contains(' ')) {
                        Some(k) => field_err(
                            "keys",
                            index,
                            format!(
                                "key {k:?} contains a space (the KEYS separator) and would read \
                                 back as several keys; give the keys as one string to store it \
                                 as is, or as a list of keys without spaces"
                            ),
                        ),
                        None => field_err("keys", index, e),
                    });
                }
            }
        }
        if m.transaction == crate::message::TransactionType::Prepared {
            // What a RocketMQ producer sets on a half message (sendMessageInTransaction).
            push(props, property::TRAN_MSG, "true");
            if let Some(g) = m.producer_group {
                validate_property(property::PGROUP, g)
                    .map_err(|e| field_err("producer_group", index, e))?;
                push(props, property::PGROUP, g);
            }
        }
        if delayed {
            let qid = m.queue_id.to_string();
            let lvl = level.to_string();
            push(props, property::REAL_TOPIC, m.topic);
            push(props, property::REAL_QID, &qid);
            push(props, property::DELAY, &lvl);
        }
        for (k, v) in m.properties {
            validate_property(k, v).map_err(|e| field_err("properties", index, e))?;
            if property::RESERVED.contains(k) {
                return Err(field_err(
                    "properties",
                    index,
                    format!("{k:?} is a reserved property name; use the matching argument (tags, keys, ...)"),
                ));
            }
            push(props, k, v);
        }
        Ok(())
    })();
    if let Err(e) = result {
        props.truncate(start);
        return Err(e);
    }
    if cfg.enabled_append_prop_crc {
        rocketstore_format::prop_crc::append_placeholder(props);
    }
    let props_len = props.len() - start;
    if props_len > MAX_PROPERTIES_LEN {
        props.truncate(start);
        return Err(Error::MessageTooLarge {
            field: "properties",
            size: props_len,
            max: MAX_PROPERTIES_LEN,
            index,
        });
    }
    let store_host = m.store_host.unwrap_or(cfg.store_host);
    let born_host = m.born_host.unwrap_or(store_host);
    let (topic, queue_id) = if delayed {
        (rocketstore_format::SCHEDULE_TOPIC, level - 1)
    } else {
        (m.topic, m.queue_id)
    };
    let version = MessageVersion::for_topic(topic.len());
    let len = record_len(
        born_host.is_v6(),
        store_host.is_v6(),
        version,
        m.body.len(),
        topic.len(),
        props_len,
    );
    let max = (cfg.max_record_size())
        .min(file_size.saturating_sub(rocketstore_format::END_FILE_MIN_BLANK_LENGTH as u64));
    if len as u64 > max {
        props.truncate(start);
        return Err(Error::MessageTooLarge {
            field: "record",
            size: len,
            max: max as usize,
            index,
        });
    }
    Ok(Prepared {
        topic,
        body: m.body,
        props: start..props.len(),
        header: RecordHeader {
            queue_id,
            flag: m.flag,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: m.transaction.sys_flag()
                | m.compression
                    .map_or(0, crate::compression::Compression::sys_flag),
            born_timestamp: m.born_timestamp.unwrap_or(now),
            born_host,
            store_timestamp: 0,
            store_host,
            reconsume_times: m.reconsume_times,
            prepared_transaction_offset: m.prepared_transaction_offset,
        },
        version,
        len,
        prop_crc: cfg.enabled_append_prop_crc,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fast_uniq_keys_match_the_codec() {
        let host: HostAddr = "10.0.0.1:10911".parse().unwrap();
        let g = UniqKeyGen::new(&host);
        let now = 1_700_000_000_000;
        let c = g.counter.load(Ordering::Relaxed);
        let mut out = Vec::new();
        g.next_into(now, &mut out);
        let expect = rocketstore_format::uniq_key(
            &g.prefix(),
            (now - month_start_utc(now)) as i32,
            c as i16,
        );
        assert_eq!(String::from_utf8(out).unwrap(), expect);
    }

    #[test]
    fn props_capacity_covers_what_prepare_writes() {
        let cfg = StoreConfig {
            store_host: "[2001:db8::1]:10911".parse().unwrap(),
            ..StoreConfig::default()
        };
        let uniq = UniqKeyGen::new(&cfg.store_host);
        let keys = ["order-1", "order-22"];
        let user = [("a", "1"), ("color", "blue")];
        let topic = "T".repeat(200);
        let msgs = [
            PutMessage {
                topic: "T",
                body: b"x",
                ..Default::default()
            },
            PutMessage {
                topic: "T",
                body: b"x",
                tags: Some("TagA"),
                keys: &keys,
                properties: &user,
                ..Default::default()
            },
            PutMessage {
                topic: &topic,
                body: b"x",
                tags: Some("TagA"),
                delay_level: 3,
                uniq_key: Some("MY-OWN-KEY"),
                ..Default::default()
            },
        ];
        for m in &msgs {
            let mut props = Vec::new();
            let ctx = PrepareCtx {
                cfg: &cfg,
                file_size: 1 << 30,
                uniq: &uniq,
                now: now_ms(),
            };
            prepare(m, None, false, &ctx, &mut props).unwrap();
            assert!(
                props.len() <= props_capacity(m),
                "{} > {}",
                props.len(),
                props_capacity(m)
            );
        }
    }

    #[test]
    fn month_start() {
        // 2023-11-14T22:13:20Z -> 2023-11-01T00:00:00Z
        assert_eq!(month_start_utc(1_700_000_000_000), 1_698_796_800_000);
        assert_eq!(month_start_utc(0), 0);
    }
}

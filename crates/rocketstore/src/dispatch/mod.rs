//! What the dispatcher extracts from each commit log record (RocketMQ `DispatchRequest`), and
//! the subscription filter used by reads and long polling.

use rocketstore_format::{sysflag, RecordView, SCHEDULE_TOPIC};

mod dispatcher;

pub(crate) use dispatcher::Dispatcher;
pub use dispatcher::UndispatchableTopic;

/// A property's raw value without building the map (last wins; empty names and values are
/// skipped): the format crate's one rule.
pub(crate) use rocketstore_format::property_value as raw_property;

/// The dispatch-relevant facts of one record.
#[derive(Debug, Clone)]
pub(crate) struct DispatchRequest<'a> {
    pub(crate) topic: &'a str,
    pub(crate) queue_id: i32,
    pub(crate) commitlog_offset: i64,
    pub(crate) msg_size: i32,
    pub(crate) tags_code: i64,
    pub(crate) store_timestamp: i64,
    pub(crate) queue_offset: i64,
    pub(crate) sys_flag: i32,
    /// The raw `KEYS` value (non-empty), as stored: its UTF-8 is checked where it is used
    /// ([`DispatchRequest::keys`]), which may be another thread.
    pub(crate) keys_raw: Option<&'a [u8]>,
    /// The raw `UNIQ_KEY` value (non-empty), as stored.
    pub(crate) uniq_key_raw: Option<&'a [u8]>,
}

impl<'a> DispatchRequest<'a> {
    /// The `KEYS` value if it is UTF-8 (a value that is not is not indexed).
    pub(crate) fn keys(&self) -> Option<&'a str> {
        utf8(self.keys_raw)
    }

    /// The `UNIQ_KEY` value if it is UTF-8.
    pub(crate) fn uniq_key(&self) -> Option<&'a str> {
        utf8(self.uniq_key_raw)
    }

    /// NOT and COMMIT records go to the consume queue (§5.8), unless their topic cannot safely
    /// be a directory name ([`DispatchRequest::undispatchable`]).
    pub(crate) fn goes_to_cq(&self) -> bool {
        self.cq_type() && rocketstore_format::is_safe_topic_dir(self.topic)
    }

    /// NOT and COMMIT records.
    fn cq_type(&self) -> bool {
        let t = sysflag::transaction_type(self.sys_flag);
        t == sysflag::TRANSACTION_NOT_TYPE || t == sysflag::TRANSACTION_COMMIT_TYPE
    }

    /// A NOT or COMMIT record whose topic fails [`rocketstore_format::is_safe_topic_dir`] (`..`,
    /// `/`, NUL, over 255 bytes: only a foreign or forged store holds one, puts refuse them). It
    /// is kept in the commit log (scan, offset and id reads, key queries all see it) but gets no
    /// consume queue, so no path outside `<root>/consumequeue/` is ever built from it; the
    /// dispatcher lists it in [`crate::Store::undispatchable_topics`].
    pub(crate) fn undispatchable(&self) -> bool {
        self.cq_type() && !rocketstore_format::is_safe_topic_dir(self.topic)
    }
}

fn utf8(b: Option<&[u8]>) -> Option<&str> {
    b.and_then(|b| std::str::from_utf8(b).ok())
}

/// Builds the dispatch request of a decoded record; `delay_levels` is the level table (ms).
pub(crate) fn dispatch_request<'a>(
    rec: &RecordView<'a>,
    delay_levels: &[i64],
) -> DispatchRequest<'a> {
    let facts = DispatchRequest {
        topic: rec.topic,
        queue_id: rec.queue_id,
        commitlog_offset: rec.physical_offset,
        msg_size: rec.total_size,
        tags_code: 0,
        store_timestamp: rec.store_timestamp,
        queue_offset: rec.queue_offset,
        sys_flag: rec.sys_flag,
        keys_raw: None,
        uniq_key_raw: None,
    };
    with_properties(facts, rec.properties_raw, delay_levels)
}

/// Completes a dispatch request whose header facts are set from the record's raw properties:
/// tags code, keys and unique key. Decoded records ([`dispatch_request`]) and records the
/// writer fed (`crate::feed`) both go through here, so both give the same request.
///
/// On the schedule topic a positive `DELAY` level makes the tags code the deliver time (§5.2).
/// A `DELAY` that is not an integer (which RocketMQ's validator rejects; our puts never write
/// one) leaves the plain tags code, so one odd record cannot stall dispatch.
pub(crate) fn with_properties<'a>(
    mut req: DispatchRequest<'a>,
    properties_raw: &'a [u8],
    delay_levels: &[i64],
) -> DispatchRequest<'a> {
    let props = DispatchProps::scan(properties_raw);
    let mut tags_code = rocketstore_format::tags_code(utf8(props.tags));
    if req.topic == SCHEDULE_TOPIC {
        if let Some(delay) = props.delay {
            let level: i64 = std::str::from_utf8(delay)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            let level = level.min(delay_levels.len() as i64);
            if level > 0 {
                let ms = delay_levels
                    .get((level - 1) as usize)
                    .copied()
                    .unwrap_or(1000);
                tags_code = req.store_timestamp + ms;
            }
        }
    }
    req.tags_code = tags_code;
    req.keys_raw = props.keys;
    req.uniq_key_raw = props.uniq_key;
    req
}

/// The four properties dispatch reads, found in one pass over the raw properties string with
/// the same rules as [`raw_property`] (last wins; empty names and values are skipped).
#[derive(Debug, Default, Clone, Copy)]
struct DispatchProps<'a> {
    tags: Option<&'a [u8]>,
    keys: Option<&'a [u8]>,
    uniq_key: Option<&'a [u8]>,
    delay: Option<&'a [u8]>,
}

impl<'a> DispatchProps<'a> {
    fn scan(raw: &'a [u8]) -> Self {
        let mut out = DispatchProps::default();
        let mut rest = raw;
        while !rest.is_empty() {
            let end = find_separator(rest).unwrap_or(rest.len());
            let (seg, tail) = rest.split_at(end);
            rest = tail.get(1..).unwrap_or(&[]);
            // A name is everything before the segment's first 0x01, so a segment holds one of
            // ours exactly when it starts with that name and 0x01 (no search for the 0x01).
            let (slot, name_len) = match seg.first() {
                Some(b'T') if seg.starts_with(b"TAGS\x01") => (&mut out.tags, 5),
                Some(b'K') if seg.starts_with(b"KEYS\x01") => (&mut out.keys, 5),
                Some(b'U') if seg.starts_with(b"UNIQ_KEY\x01") => (&mut out.uniq_key, 9),
                Some(b'D') if seg.starts_with(b"DELAY\x01") => (&mut out.delay, 6),
                _ => continue,
            };
            let value = seg.get(name_len..).unwrap_or(&[]);
            if value.is_empty() {
                continue;
            }
            *slot = Some(value);
        }
        out
    }
}

/// Position of the first [`rocketstore_format::PROPERTY_SEPARATOR`] in `b`, eight bytes at a
/// time: in the word `x = bytes ^ 0x0202..` (byte 0 of the chunk as the low byte) a byte is zero
/// exactly where the chunk holds the separator, and `(x - 0x0101..) & !x & 0x8080..` flags the
/// lowest such byte exactly (a flag can be wrong only above a true zero byte).
fn find_separator(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const SEP: u64 = ONES * rocketstore_format::PROPERTY_SEPARATOR as u64;
    let mut done = 0;
    let mut rest = b;
    while let Some((c, tail)) = rest.split_first_chunk::<8>() {
        let x = u64::from_le_bytes(*c) ^ SEP;
        let found = x.wrapping_sub(ONES) & !x & (ONES << 7);
        if found != 0 {
            return Some(done + (found.trailing_zeros() / 8) as usize);
        }
        done += 8;
        rest = tail;
    }
    rest.iter()
        .position(|&x| x == rocketstore_format::PROPERTY_SEPARATOR)
        .map(|p| done + p)
}

/// A RocketMQ TAG subscription expression: `*` (or empty) for everything, else tags separated by
/// `||`. Matching is first by tagsCode (hash, as the broker does), then by the real tag string
/// (as clients do), so hash collisions never leak through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    tags: Vec<String>,
    codes: Vec<i64>,
}

impl Subscription {
    /// Parses an expression. `None`, `""` and `"*"` match everything.
    pub fn parse(expr: Option<&str>) -> Self {
        let expr = expr.map(str::trim).unwrap_or("");
        if expr.is_empty() || expr == "*" {
            return Self {
                tags: Vec::new(),
                codes: Vec::new(),
            };
        }
        let tags: Vec<String> = expr
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        let codes = tags
            .iter()
            .map(|t| rocketstore_format::tags_code(Some(t)))
            .collect();
        Self { tags, codes }
    }

    /// True if every message matches.
    pub fn is_all(&self) -> bool {
        self.tags.is_empty()
    }

    /// First-level filter on a consume queue unit's tagsCode (RocketMQ `DefaultMessageFilter`):
    /// ext addresses always pass.
    pub(crate) fn matches_code(&self, tags_code: i64) -> bool {
        self.is_all()
            || rocketstore_format::cq::is_ext_addr(tags_code)
            || self.codes.contains(&tags_code)
    }

    /// Second-level filter on the record's TAGS property.
    pub(crate) fn matches_tags(&self, tags: Option<&str>) -> bool {
        self.is_all() || tags.is_some_and(|t| self.tags.iter().any(|s| s == t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocketstore_format::property;

    #[test]
    fn raw_lookup_is_last_wins_and_skips_empty_values() {
        let raw = b"A\x01\x02B\x01x\x02K\x01v1\x02K\x01v2\x02";
        assert_eq!(raw_property(raw, "A"), None);
        assert_eq!(raw_property(raw, "B"), Some(&b"x"[..]));
        assert_eq!(raw_property(raw, "K"), Some(&b"v2"[..]));
        assert_eq!(raw_property(b"", "K"), None);
        assert_eq!(raw_property(b"V\x01a\x01b\x02", "V"), Some(&b"a\x01b"[..]));
    }

    #[test]
    fn one_pass_scan_agrees_with_raw_lookup() {
        let names = [
            property::TAGS,
            property::KEYS,
            property::UNIQ_KEY,
            property::DELAY,
        ];
        let raws: [&[u8]; 7] = [
            b"",
            b"TAGS\x01A\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u\x02",
            b"TAGS\x01\x02TAGS\x01B\x02TAGS\x01\x02DELAY\x013",
            b"\x01x\x02KEYS\x01a\x02KEYS\x01b\x02",
            b"UNIQ_KEY\x01a\x01b\x02junk\x02\x02TAGS",
            b"TAGSX\x01no\x02XTAGS\x01no\x02TAGS\x01yes",
            b"__CRC32#\x010000000000\x02TAGS\x01T\x02",
        ];
        for raw in raws {
            let p = DispatchProps::scan(raw);
            let got = [p.tags, p.keys, p.uniq_key, p.delay];
            for (name, got) in names.iter().zip(got) {
                assert_eq!(got, raw_property(raw, name), "{name} in {raw:?}");
            }
        }
    }

    #[test]
    fn separator_search_finds_the_first_separator() {
        for n in 0..40 {
            for at in 0..=n {
                let mut b: Vec<u8> = (0..n)
                    .map(|i| [b'a', 0x01, 0x03, 0xff, 0x82][i % 5])
                    .collect();
                if at < n {
                    b[at] = 0x02;
                    if at + 1 < n {
                        b[at + 1] = 0x02;
                    }
                }
                let want = b.iter().position(|&x| x == 0x02);
                assert_eq!(find_separator(&b), want, "{b:?}");
            }
        }
    }

    #[test]
    fn subscriptions() {
        let all = Subscription::parse(Some("*"));
        assert!(all.matches_code(123) && all.matches_tags(None));
        let s = Subscription::parse(Some("TagA || TagB"));
        assert!(s.matches_code(2_598_919) && s.matches_code(2_598_920));
        assert!(!s.matches_code(1));
        assert!(
            s.matches_tags(Some("TagB")) && !s.matches_tags(Some("TagC")) && !s.matches_tags(None)
        );
    }
}

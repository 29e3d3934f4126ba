//! Topic validation and the record version chosen by topic length (spec §3.1, reliability §4.3).

pub use crate::error::{FieldError, FieldErrorReason};

use crate::consts::{
    MAX_TOPIC_LEN, MAX_TOPIC_LEN_V1, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2,
};

/// Checks a topic name: non-empty, only `[%|a-zA-Z0-9_-]` (RocketMQ `TopicValidator`), at most
/// [`MAX_TOPIC_LEN`] (255) bytes, and never `.` or `..` (topics become directory names). Topics of
/// 128..=255 bytes need a V2 record ([`MessageVersion::for_topic`]); RocketMQ's broker accepts them
/// only for `%RETRY%` topics, which is a policy left to the caller.
///
/// # Errors
/// [`FieldError`] with field `"topic"`.
pub fn validate_topic(topic: &str) -> Result<(), FieldError> {
    if topic.is_empty() {
        return Err(FieldError::new("topic", FieldErrorReason::Empty));
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err(FieldError::new(
            "topic",
            FieldErrorReason::TooLong {
                len: topic.len(),
                max: MAX_TOPIC_LEN,
            },
        ));
    }
    if topic == "." || topic == ".." {
        return Err(FieldError::new("topic", FieldErrorReason::Reserved));
    }
    if let Some((index, ch)) = topic.char_indices().find(|&(_, c)| !is_topic_char(c)) {
        return Err(FieldError::new(
            "topic",
            FieldErrorReason::IllegalChar { ch, index },
        ));
    }
    Ok(())
}

/// True if `topic` can safely be the name of its consume-queue directory
/// (`consumequeue/<topic>/<queueId>/`), which is what a broker uses whatever the topic's
/// characters: non-empty, at most [`MAX_TOPIC_LEN`] (255) bytes (the usual file-name limit), not
/// `.` or `..`, and without `/` or NUL. Any other UTF-8 text (e.g. `Tópico-中文-😀`, written by
/// another RocketMQ implementation) is a valid directory name. Every topic that passes
/// [`validate_topic`] passes this check.
///
/// ```
/// use rocketstore_format::topic::is_safe_topic_dir;
/// assert!(is_safe_topic_dir("T\u{f3}pico-\u{4e2d}\u{6587}-\u{1f600}"));
/// assert!(!is_safe_topic_dir(".."));
/// assert!(!is_safe_topic_dir("a/b"));
/// ```
pub fn is_safe_topic_dir(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= MAX_TOPIC_LEN
        && topic != "."
        && topic != ".."
        && !topic.bytes().any(|b| b == b'/' || b == 0)
}

fn is_topic_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')
}

/// Record format version, identified only by the magic code (no SYSFLAG bit marks it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageVersion {
    /// Magic [`MESSAGE_MAGIC_CODE_V1`], 1-byte (signed) topic length.
    V1,
    /// Magic [`MESSAGE_MAGIC_CODE_V2`], 2-byte (signed) topic length; RocketMQ 5.1+.
    V2,
}

impl MessageVersion {
    /// The version RocketMQ (`autoMessageVersionOnTopicLen`) writes for a topic of this many bytes:
    /// V2 iff the length is above 127.
    pub fn for_topic(topic_len_bytes: usize) -> Self {
        if topic_len_bytes > MAX_TOPIC_LEN_V1 {
            MessageVersion::V2
        } else {
            MessageVersion::V1
        }
    }

    /// The magic code written at offset 4.
    pub fn magic_code(self) -> i32 {
        match self {
            MessageVersion::V1 => MESSAGE_MAGIC_CODE_V1,
            MessageVersion::V2 => MESSAGE_MAGIC_CODE_V2,
        }
    }

    /// Width of the TOPICLENGTH field: 1 (V1) or 2 (V2).
    pub fn topic_len_width(self) -> usize {
        match self {
            MessageVersion::V1 => 1,
            MessageVersion::V2 => 2,
        }
    }

    /// Longest topic (bytes) the TOPICLENGTH field can express: 127 (V1) or 32767 (V2).
    pub fn max_topic_len(self) -> usize {
        match self {
            MessageVersion::V1 => MAX_TOPIC_LEN_V1,
            MessageVersion::V2 => 32_767,
        }
    }

    /// The version for a magic code; `None` for BLANK and anything else.
    pub fn from_magic(magic: i32) -> Option<Self> {
        match magic {
            MESSAGE_MAGIC_CODE_V1 => Some(MessageVersion::V1),
            MESSAGE_MAGIC_CODE_V2 => Some(MessageVersion::V2),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::consts::BLANK_MAGIC_CODE;

    #[test]
    fn topics() {
        for ok in ["T", "TopicTest", "%RETRY%group", "a|b", "a_b-c", "0"] {
            assert!(validate_topic(ok).is_ok(), "{ok}");
        }
        assert!(validate_topic(&"a".repeat(255)).is_ok());
        let long = validate_topic(&"a".repeat(256)).unwrap_err();
        assert_eq!(
            long.reason,
            FieldErrorReason::TooLong { len: 256, max: 255 }
        );
        for bad in ["", ".", "..", "a.b", "a/b", "a b", "中文", "a\u{0}", "../x"] {
            let e = validate_topic(bad).unwrap_err();
            assert_eq!(e.field, "topic");
        }
        assert_eq!(
            validate_topic(".").unwrap_err().reason,
            FieldErrorReason::Reserved
        );
    }

    #[test]
    fn topic_dirs() {
        for ok in [
            "T",
            "%RETRY%g",
            "T\u{f3}pico-\u{4e2d}\u{6587}-\u{1f600}",
            "a b",
            "a.b",
            "...",
            "a\\b",
        ] {
            assert!(is_safe_topic_dir(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "/", "../x", "a\u{0}b"] {
            assert!(!is_safe_topic_dir(bad), "{bad:?}");
        }
        assert!(is_safe_topic_dir(&"\u{e9}".repeat(127)));
        assert!(!is_safe_topic_dir(&"\u{e9}".repeat(128)));
        // Everything the client's validator accepts is a safe directory name.
        for ok in ["T", "TopicTest", "%RETRY%group", "a|b", "a_b-c", "0"] {
            assert!(validate_topic(ok).is_ok() && is_safe_topic_dir(ok));
        }
    }

    #[test]
    fn versions() {
        assert_eq!(MessageVersion::for_topic(1), MessageVersion::V1);
        assert_eq!(MessageVersion::for_topic(127), MessageVersion::V1);
        assert_eq!(MessageVersion::for_topic(128), MessageVersion::V2);
        assert_eq!(MessageVersion::V1.magic_code(), MESSAGE_MAGIC_CODE_V1);
        assert_eq!(MessageVersion::V2.magic_code(), MESSAGE_MAGIC_CODE_V2);
        assert_eq!(MessageVersion::V1.topic_len_width(), 1);
        assert_eq!(MessageVersion::V2.topic_len_width(), 2);
        assert_eq!(
            MessageVersion::from_magic(MESSAGE_MAGIC_CODE_V2),
            Some(MessageVersion::V2)
        );
        assert_eq!(MessageVersion::from_magic(BLANK_MAGIC_CODE), None);
        assert_eq!(MessageVersion::from_magic(0), None);
    }
}

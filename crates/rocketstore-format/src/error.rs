//! [`FieldError`]: a single field (topic, property, host, message id, delay level ...) failed
//! validation or parsing.

/// Why a field was rejected. See [`FieldError`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldErrorReason {
    /// The field is empty but must not be.
    #[error("must not be empty")]
    Empty,
    /// The field is longer than allowed (lengths in bytes unless stated otherwise).
    #[error("length {len} exceeds the maximum {max}")]
    TooLong {
        /// Actual length.
        len: usize,
        /// Maximum allowed length.
        max: usize,
    },
    /// The field has a length that is not one of the accepted lengths.
    #[error("length {len} is not accepted")]
    BadLength {
        /// Actual length.
        len: usize,
    },
    /// The field contains a character that is not allowed.
    #[error("illegal character {ch:?} at byte {index}")]
    IllegalChar {
        /// The offending character.
        ch: char,
        /// Its byte index in the field.
        index: usize,
    },
    /// The value is reserved (for example the topic names `.` and `..`).
    #[error("reserved value")]
    Reserved,
    /// The bytes are not valid UTF-8.
    #[error("not valid UTF-8")]
    InvalidUtf8,
    /// The value is not a (Java `Integer.parseInt` / `Long.parseLong`) integer.
    #[error("not an integer")]
    NotAnInteger,
    /// A numeric value is outside its allowed range.
    #[error("value {value} is outside the range {min} to {max}")]
    OutOfRange {
        /// The value.
        value: i64,
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// Any other malformation, described by a static message.
    #[error("{0}")]
    Invalid(&'static str),
}

/// A field failed validation or parsing. `Display` names the field, e.g.
/// `invalid topic: illegal character '/' at byte 3`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
#[error("invalid {field}: {reason}")]
pub struct FieldError {
    /// Which field: `"topic"`, `"property name"`, `"property value"`, `"host"`, `"port"`,
    /// `"msg id"`, `"delay level"`, `"delay table"`.
    pub field: &'static str,
    /// Why it was rejected.
    pub reason: FieldErrorReason,
}

impl FieldError {
    /// Builds an error for `field`.
    pub fn new(field: &'static str, reason: FieldErrorReason) -> Self {
        FieldError { field, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_field() {
        let e = FieldError::new("topic", FieldErrorReason::IllegalChar { ch: '/', index: 3 });
        assert_eq!(
            e.to_string(),
            "invalid topic: illegal character '/' at byte 3"
        );
        let e = FieldError::new("property name", FieldErrorReason::Empty);
        assert_eq!(e.to_string(), "invalid property name: must not be empty");
    }
}

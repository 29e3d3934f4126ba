//! The one rule for the `KEYS` property (spec §3.5, §6.3), shared by every put path.
//!
//! RocketMQ's `Message.setKeys(String)` stores the string as is and `setKeys(Collection)` joins
//! the keys with one space; the index (`IndexService.buildIndex`) splits the stored value on
//! spaces and indexes every non-empty token. Here:
//!
//! - keys given as **one string** are stored byte for byte as given: [`key_parts`] splits it on
//!   every space so that joining the parts with one space gives the string back exactly;
//! - keys given as **a list** are joined with one space by [`push_keys_value`], which refuses an
//!   element containing a space (it could not round-trip: it would read back as two keys).
//!
//! The engine's put validation calls [`push_keys_value`] for every message; a front end (the
//! Python `put`, `put_batch` of dicts, the Arrow `keys` column) turns a string into parts with
//! [`key_parts`] and passes a list's elements as they are. Readers split with [`index_tokens`].

use crate::error::{FieldError, FieldErrorReason};
use crate::properties::validate_property;

/// The separator between keys inside the `KEYS` value.
pub const KEY_SEPARATOR: u8 = b' ';

/// The parts of keys given as one string: `keys.split(' ')`, empty parts included, so that
/// [`push_keys_value`] of the parts stores exactly `keys`.
///
/// ```
/// use rocketstore_format::keys::{key_parts, push_keys_value};
/// let parts: Vec<&str> = key_parts("order-1  order-2").collect();
/// let mut out = Vec::new();
/// push_keys_value(&parts, &mut out).unwrap();
/// assert_eq!(out, b"order-1  order-2");
/// ```
pub fn key_parts(keys: &str) -> std::str::Split<'_, char> {
    keys.split(' ')
}

/// Checks keys given as parts (a list, or [`key_parts`] of a string) and appends the `KEYS`
/// value, the parts joined with one space, to `out`. Appends nothing and returns `Ok(0)` when the
/// joined value is empty (no keys: RocketMQ drops a property with an empty value). Returns the
/// bytes appended.
///
/// # Errors
/// [`FieldError`] with field `"keys"` (nothing appended): a part containing a space (it would not
/// read back as one key), or a NUL, `\u{1}` or `\u{2}` (property separators).
///
/// ```
/// use rocketstore_format::keys::push_keys_value;
/// let mut out = Vec::new();
/// assert_eq!(push_keys_value(&["a", "b"], &mut out).unwrap(), 3);
/// assert_eq!(out, b"a b");
/// assert!(push_keys_value(&["a b"], &mut out).is_err());
/// ```
pub fn push_keys_value(parts: &[&str], out: &mut Vec<u8>) -> Result<usize, FieldError> {
    let mut len = parts.len().saturating_sub(1);
    for part in parts {
        if let Some(index) = part.bytes().position(|b| b == KEY_SEPARATOR) {
            return Err(FieldError::new(
                "keys",
                FieldErrorReason::IllegalChar { ch: ' ', index },
            ));
        }
        if !part.is_empty() {
            validate_property("KEYS", part).map_err(|e| FieldError::new("keys", e.reason))?;
        }
        len += part.len();
    }
    if parts.iter().all(|p| p.is_empty()) {
        return Ok(0);
    }
    out.reserve(len);
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push(KEY_SEPARATOR);
        }
        out.extend_from_slice(part.as_bytes());
    }
    Ok(len)
}

/// The keys a stored `KEYS` value holds, as the index sees them: its non-empty space-separated
/// tokens.
pub fn index_tokens(value: &str) -> impl Iterator<Item = &str> {
    value.split(' ').filter(|k| !k.is_empty())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn stored(parts: &[&str]) -> Result<String, FieldError> {
        let mut out = Vec::new();
        push_keys_value(parts, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn a_string_is_stored_as_is() {
        for s in [
            "a",
            "a b",
            "a  b",
            " a",
            "a ",
            "order-1 order-2 order-3",
            "\u{4e2d} \u{1f600}",
        ] {
            let parts: Vec<&str> = key_parts(s).collect();
            assert_eq!(stored(&parts).unwrap(), s);
        }
        assert_eq!(stored(&key_parts("").collect::<Vec<_>>()).unwrap(), "");
        assert_eq!(stored(&key_parts("   ").collect::<Vec<_>>()).unwrap(), "");
    }

    #[test]
    fn a_list_is_joined_and_elements_must_not_hold_a_space() {
        assert_eq!(stored(&["a", "b"]).unwrap(), "a b");
        assert_eq!(stored(&[]).unwrap(), "");
        let e = stored(&["a", "b c"]).unwrap_err();
        assert_eq!(e.field, "keys");
        assert_eq!(
            e.reason,
            FieldErrorReason::IllegalChar { ch: ' ', index: 1 }
        );
        assert!(stored(&["a\u{1}"]).is_err());
        assert!(stored(&["a\u{0}"]).is_err());
        let mut out = b"x".to_vec();
        assert!(push_keys_value(&["ok", "no pe"], &mut out).is_err());
        assert_eq!(out, b"x", "nothing appended on error");
    }

    #[test]
    fn tokens() {
        assert_eq!(index_tokens(" a  b ").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(index_tokens("").count(), 0);
    }
}

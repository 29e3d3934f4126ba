//! Values kept per topic by the recovery walk, which updates one for every record it reads
//! ([`super::queues::QueueTails`], [`super::cq_check::Window`]).
//!
//! A record's topic is looked up as a `&str` borrowed from the mapping. The topic of the last
//! lookup and the first [`NEAR`] topics are found by comparing names (a length, a last byte and
//! a short `memcmp`); only a store with more topics than that hashes the names of the rest. Most
//! stores have a handful of topics, and a hash per record per table was a third of the walk's
//! own work (BENCHMARKS.md, tenth pass).

use std::collections::{BTreeMap, HashMap};

use crate::util::same_name;

/// Topics found by comparing names; later topics go through a map.
const NEAR: usize = 16;

/// Values by topic, in the order the topics were first seen.
#[derive(Debug, Clone)]
pub(crate) struct ByTopic<V> {
    entries: Vec<(String, V)>,
    /// Index in `entries` of each topic past the first [`NEAR`].
    far: HashMap<String, usize>,
    /// Index in `entries` of the last topic looked up.
    last: usize,
}

impl<V> Default for ByTopic<V> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            far: HashMap::new(),
            last: 0,
        }
    }
}

impl<V: Default> ByTopic<V> {
    /// The value of `topic`, a default one added if the topic is new.
    pub(crate) fn entry(&mut self, topic: &str) -> &mut V {
        let i = match self.find(topic) {
            Some(i) => i,
            None => {
                let i = self.entries.len();
                if i >= NEAR {
                    self.far.insert(topic.to_string(), i);
                }
                self.entries.push((topic.to_string(), V::default()));
                i
            }
        };
        self.last = i;
        // `i` is an index of `entries`: found there, or the entry just pushed.
        &mut self.entries[i].1
    }

    fn find(&self, topic: &str) -> Option<usize> {
        if self
            .entries
            .get(self.last)
            .is_some_and(|(t, _)| same_name(t, topic))
        {
            return Some(self.last);
        }
        if let Some(i) = self
            .entries
            .iter()
            .take(NEAR)
            .position(|(t, _)| same_name(t, topic))
        {
            return Some(i);
        }
        self.far.get(topic).copied()
    }
}

impl<V> ByTopic<V> {
    /// Every topic and its value, in the order the topics were first seen.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.entries.iter().map(|(t, v)| (t, v))
    }
}

impl<V> IntoIterator for ByTopic<V> {
    type Item = (String, V);
    type IntoIter = std::vec::IntoIter<(String, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

/// Equal when they hold the same topics with equal values, whatever the order they were seen in.
impl<V: PartialEq> PartialEq for ByTopic<V> {
    fn eq(&self, other: &Self) -> bool {
        let a: BTreeMap<&String, &V> = self.iter().collect();
        let b: BTreeMap<&String, &V> = other.iter().collect();
        a == b
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Topics near and far, looked up in every order, keep their own values; equality ignores
    /// the order topics were seen in.
    #[test]
    fn every_topic_keeps_its_own_value_near_or_far() {
        let topics: Vec<String> = (0..60).map(|i| format!("T{}", i * 7 % 60)).collect();
        let mut t: ByTopic<u64> = ByTopic::default();
        let mut want: HashMap<String, u64> = HashMap::new();
        for round in 0..5u64 {
            for (i, topic) in topics.iter().enumerate() {
                if (i as u64 + round).is_multiple_of(3) {
                    continue;
                }
                *t.entry(topic) += i as u64 + 1;
                *want.entry(topic.clone()).or_default() += i as u64 + 1;
                // The same topic twice in a row (the last-hit path).
                *t.entry(topic) += 1;
                *want.get_mut(topic).unwrap() += 1;
            }
        }
        assert_eq!(t.iter().count(), want.len());
        for (topic, v) in t.iter() {
            assert_eq!(Some(v), want.get(topic), "{topic}");
        }
        let mut reversed: ByTopic<u64> = ByTopic::default();
        for (topic, v) in t.clone().into_iter().collect::<Vec<_>>().into_iter().rev() {
            *reversed.entry(&topic) = v;
        }
        assert_eq!(t, reversed);
        *reversed.entry("T1") += 1;
        assert_ne!(t, reversed);
        // Names of the same length and last byte are told apart.
        let mut close: ByTopic<u8> = ByTopic::default();
        *close.entry("ab1") = 1;
        *close.entry("cd1") = 2;
        assert_eq!((*close.entry("ab1"), *close.entry("cd1")), (1, 2));
    }
}

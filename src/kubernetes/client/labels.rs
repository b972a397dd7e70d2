//! An object's labels, as kept: the few pairs something reads, sorted by key, in one
//! allocation. A `BTreeMap` of one label (an EndpointSlice keeps only its Service's name)
//! takes a node of eleven pairs, some 540 bytes: 2.7 MB at 5,000 slices (issue 24).

use crate::config::kubernetes::selector::LabelSet;

/// Labels by key, each key once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Box<[(String, String)]>);

impl Labels {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    /// Whether the object has label `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// The pairs, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Keeps the labels `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &String) -> bool) {
        if self.0.iter().all(|(k, v)| keep(k, v)) {
            return;
        }
        let kept: Vec<(String, String)> = std::mem::take(&mut self.0)
            .into_vec()
            .into_iter()
            .filter(|(k, v)| keep(k, v))
            .collect();
        self.0 = kept.into_boxed_slice();
    }

    /// Sets `key` to `value`.
    pub fn insert(&mut self, key: String, value: String) {
        let mut pairs = std::mem::take(&mut self.0).into_vec();
        match pairs.binary_search_by(|(k, _)| k.as_str().cmp(&key)) {
            Ok(i) => pairs[i].1 = value,
            Err(i) => pairs.insert(i, (key, value)),
        }
        self.0 = pairs.into_boxed_slice();
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }
}

impl FromIterator<(String, String)> for Labels {
    /// The pairs by key; of a key given twice, the last value.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Labels {
        let mut pairs: Vec<(String, String)> = iter.into_iter().collect();
        // Stable: equal keys keep their order, and the last of them is kept below.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => out.push((k, v)),
            }
        }
        Labels(out.into_boxed_slice())
    }
}

impl LabelSet for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn labels_are_found_by_key_whatever_the_order_they_came_in() {
        let l = labels(&[("b", "2"), ("a", "1"), ("c", "3"), ("a", "9")]);
        assert_eq!(l.len(), 3);
        assert_eq!(
            l.get("a").map(String::as_str),
            Some("9"),
            "the last of a key"
        );
        assert_eq!(l.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(l.contains_key("c") && !l.contains_key("d"));
        let mut m = l.clone();
        m.retain(|k, _| k != "b");
        assert_eq!(m, labels(&[("a", "9"), ("c", "3")]));
        m.insert("b".into(), "x".into());
        m.insert("a".into(), "y".into());
        assert_eq!(m, labels(&[("a", "y"), ("b", "x"), ("c", "3")]));
        assert!(Labels::default().is_empty());
    }

    #[test]
    fn selectors_read_them_as_they_read_a_map() {
        use crate::config::kubernetes::selector::LabelSelector;
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let map: std::collections::BTreeMap<String, String> =
            l.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for text in [
            "app=web",
            "app in (db)",
            "!tier",
            "n>3",
            "tier,app!=db",
            "x",
        ] {
            let s = LabelSelector::parse(text).unwrap();
            assert_eq!(s.matches(&l), s.matches(&map), "{text}");
        }
    }
}

//! Kubernetes label selectors in their string form (`kubectl -l`, the API's `labelSelector`
//! query parameter), parsed with the grammar of the API server so that a selector edgenetd
//! accepts is one the server accepts too, and a typo is a config error at its column rather
//! than a 400 from the cluster at run time:
//!
//! ```text
//! selector    ::= requirement ( "," requirement )*
//! requirement ::= "!" KEY | KEY [ ("=" | "==" | "!=") VALUE | ("in" | "notin") "(" values ")"
//!                               | (">" | "<") INTEGER ]
//! values      ::= VALUE ( "," VALUE )*   (an empty set means the one empty value)
//! ```
//!
//! KEY is a qualified name (an optional DNS subdomain prefix and `/`, then a name of at most
//! 63 characters); VALUE is empty or at most 63 characters of letters, digits, `-`, `_`, `.`
//! that start and end with a letter or digit.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed selector: every requirement must hold (the API's AND).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    /// The requirements, in the order written.
    pub requirements: Vec<Requirement>,
}

/// One requirement on one label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the label is compared.
    pub op: Operator,
    /// The values compared with (one for `=`, `!=`, `>`, `<`; none for exists tests).
    pub values: Vec<String>,
}

/// The comparison of a requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key=value` or `key==value`.
    Equals,
    /// `key!=value`: also true when the label is absent.
    NotEquals,
    /// `key in (a,b)`.
    In,
    /// `key notin (a,b)`: also true when the label is absent.
    NotIn,
    /// `key`.
    Exists,
    /// `!key`.
    DoesNotExist,
    /// `key>N`: the label is an integer greater than N.
    GreaterThan,
    /// `key<N`: the label is an integer less than N.
    LessThan,
}

/// A selector that does not parse: where (byte offset into the text) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SelectorError {
    /// Byte offset into the selector text.
    pub at: usize,
    /// What was wrong and what was expected.
    pub message: String,
}

/// What a selector reads of an object: its labels, by key.
pub trait LabelSet {
    /// The value of label `key`, if the object has it.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelSet for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelSelector {
    /// Parses the string form; the empty string selects everything.
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        let tokens = lex(text);
        Parser { tokens, next: 0 }.selector(text.len())
    }

    /// True when `labels` meet every requirement.
    pub fn matches(&self, labels: &(impl LabelSet + ?Sized)) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True for the selector that selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl Requirement {
    /// True when `labels` meet this requirement.
    pub fn matches(&self, labels: &(impl LabelSet + ?Sized)) -> bool {
        let value = labels.label(&self.key);
        let int = || value.and_then(|v| v.parse::<i64>().ok());
        let bound = || self.values.first().and_then(|v| v.parse::<i64>().ok());
        let listed = |v: &str| self.values.iter().any(|w| w == v);
        match self.op {
            Operator::Equals | Operator::In => value.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan => matches!((int(), bound()), (Some(v), Some(b)) if v > b),
            Operator::LessThan => matches!((int(), bound()), (Some(v), Some(b)) if v < b),
        }
    }
}

/// The canonical string form, as sent in the `labelSelector` query parameter.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let one = r.values.first().map_or("", String::as_str);
            match r.op {
                Operator::Equals => write!(f, "{}={one}", r.key)?,
                Operator::NotEquals => write!(f, "{}!={one}", r.key)?,
                Operator::In => write!(f, "{} in ({})", r.key, r.values.join(","))?,
                Operator::NotIn => write!(f, "{} notin ({})", r.key, r.values.join(","))?,
                Operator::Exists => write!(f, "{}", r.key)?,
                Operator::DoesNotExist => write!(f, "!{}", r.key)?,
                Operator::GreaterThan => write!(f, "{}>{one}", r.key)?,
                Operator::LessThan => write!(f, "{}<{one}", r.key)?,
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Comma,
    Open,
    Close,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
}

/// Tokens with their byte offsets. Like the API server's lexer, a word is any run of
/// characters that are neither blanks nor one of `,()=!<>`.
fn lex(text: &str) -> Vec<(Tok, usize)> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next_is_eq = chars.peek().is_some_and(|(_, n)| *n == '=');
        let tok = match c {
            c if c.is_whitespace() => continue,
            ',' => Tok::Comma,
            '(' => Tok::Open,
            ')' => Tok::Close,
            '<' => Tok::Lt,
            '>' => Tok::Gt,
            '=' | '!' if next_is_eq => {
                chars.next();
                if c == '=' { Tok::DoubleEq } else { Tok::NotEq }
            }
            '=' => Tok::Eq,
            '!' => Tok::Not,
            _ => {
                let mut end = at + c.len_utf8();
                while let Some((i, n)) = chars.peek().copied() {
                    if n.is_whitespace() || ",()=!<>".contains(n) {
                        break;
                    }
                    end = i + n.len_utf8();
                    chars.next();
                }
                Tok::Word(text[at..end].to_string())
            }
        };
        out.push((tok, at));
    }
    out
}

struct Parser {
    tokens: Vec<(Tok, usize)>,
    next: usize,
}

impl Parser {
    fn selector(mut self, end: usize) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        if self.tokens.is_empty() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(self.requirement(end)?);
            match self.take() {
                None => return Ok(LabelSelector { requirements }),
                Some((Tok::Comma, _)) => {}
                Some((_, at)) => return Err(err(at, "expected `,` between requirements")),
            }
        }
    }

    fn requirement(&mut self, end: usize) -> Result<Requirement, SelectorError> {
        let negated = matches!(self.peek(), Some((Tok::Not, _)));
        if negated {
            self.next += 1;
        }
        let key = self.key(end)?;
        if negated {
            return Ok(Requirement {
                key,
                op: Operator::DoesNotExist,
                values: Vec::new(),
            });
        }
        let op = match self.peek() {
            None | Some((Tok::Comma, _)) => Operator::Exists,
            Some((Tok::Eq | Tok::DoubleEq, _)) => Operator::Equals,
            Some((Tok::NotEq, _)) => Operator::NotEquals,
            Some((Tok::Gt, _)) => Operator::GreaterThan,
            Some((Tok::Lt, _)) => Operator::LessThan,
            Some((Tok::Word(w), _)) if w == "in" => Operator::In,
            Some((Tok::Word(w), _)) if w == "notin" => Operator::NotIn,
            Some((_, at)) => {
                return Err(err(
                    *at,
                    "expected an operator (`=`, `==`, `!=`, `in`, `notin`, `>`, `<`) or `,`",
                ));
            }
        };
        let values = match op {
            Operator::Exists => Vec::new(),
            Operator::In | Operator::NotIn => {
                self.next += 1;
                self.value_set(end)?
            }
            _ => {
                self.next += 1;
                let (value, value_at) = self.value(end)?;
                let integer = matches!(op, Operator::GreaterThan | Operator::LessThan);
                if integer && value.parse::<i64>().is_err() {
                    return Err(err(
                        value_at,
                        format!("`{value}` after `>` or `<`: expected an integer"),
                    ));
                }
                vec![value]
            }
        };
        Ok(Requirement { key, op, values })
    }

    fn key(&mut self, end: usize) -> Result<String, SelectorError> {
        match self.take() {
            Some((Tok::Word(w), at)) => {
                check_key(&w).map_err(|m| err(at, m))?;
                Ok(w)
            }
            Some((_, at)) => Err(err(at, "expected a label key")),
            None => Err(err(end, "expected a label key")),
        }
    }

    /// A value after `=`, `!=`, `>`, `<`; a missing one is the empty value, as the API reads it.
    fn value(&mut self, end: usize) -> Result<(String, usize), SelectorError> {
        match self.peek().cloned() {
            Some((Tok::Word(w), at)) => {
                self.next += 1;
                check_value(&w).map_err(|m| err(at, m))?;
                Ok((w, at))
            }
            None | Some((Tok::Comma, _)) => Ok((String::new(), end)),
            Some((_, at)) => Err(err(at, "expected a label value")),
        }
    }

    fn value_set(&mut self, end: usize) -> Result<Vec<String>, SelectorError> {
        match self.take() {
            Some((Tok::Open, _)) => {}
            Some((_, at)) => return Err(err(at, "expected `(` after `in` or `notin`")),
            None => return Err(err(end, "expected `(` after `in` or `notin`")),
        }
        let mut values = Vec::new();
        let mut pending = true;
        loop {
            match self.take() {
                Some((Tok::Word(w), at)) if pending => {
                    check_value(&w).map_err(|m| err(at, m))?;
                    values.push(w);
                    pending = false;
                }
                Some((Tok::Comma, _)) => {
                    if pending {
                        values.push(String::new());
                    }
                    pending = true;
                }
                Some((Tok::Close, _)) => {
                    if pending {
                        values.push(String::new());
                    }
                    return Ok(values);
                }
                Some((_, at)) => return Err(err(at, "expected a value, `,` or `)`")),
                None => return Err(err(end, "expected `)` to close the value set")),
            }
        }
    }

    fn peek(&self) -> Option<&(Tok, usize)> {
        self.tokens.get(self.next)
    }

    fn take(&mut self) -> Option<(Tok, usize)> {
        let t = self.tokens.get(self.next).cloned();
        self.next += 1;
        t
    }
}

fn err(at: usize, message: impl Into<String>) -> SelectorError {
    SelectorError {
        at,
        message: message.into(),
    }
}

/// A qualified name: `[prefix/]name`, the prefix a DNS subdomain.
fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && !is_dns_subdomain(p)
    {
        return Err(format!(
            "invalid label key `{key}`: the prefix before `/` must be a lowercase DNS subdomain of at most 253 characters"
        ));
    }
    if name.is_empty() || name.len() > 63 || !is_label_name(name) {
        return Err(format!(
            "invalid label key `{key}`: the name must be 1 to 63 letters, digits, `-`, `_` or `.`, starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() || (value.len() <= 63 && is_label_name(value)) {
        return Ok(());
    }
    Err(format!(
        "invalid label value `{value}`: expected at most 63 letters, digits, `-`, `_` or `.`, starting and ending with a letter or digit"
    ))
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// RFC 1123 subdomain: dot-separated lowercase labels, at most 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && l.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_operator_parses_and_prints_canonically() {
        let s = LabelSelector::parse(
            "app = web,tier==front, env!=dev,zone in (a, b),x notin (c),has,!gone,n>3,m<10",
        )
        .unwrap();
        assert_eq!(
            s.to_string(),
            "app=web,tier=front,env!=dev,zone in (a,b),x notin (c),has,!gone,n>3,m<10"
        );
        assert_eq!(LabelSelector::parse(&s.to_string()).unwrap(), s);
        assert!(LabelSelector::parse("").unwrap().is_empty());
        let prefixed = LabelSelector::parse("edge.example.com/role=router").unwrap();
        assert_eq!(prefixed.requirements[0].key, "edge.example.com/role");
    }

    #[test]
    fn matching_follows_the_api_semantics() {
        let s = LabelSelector::parse("app=web,env!=dev,zone in (a,b),!gone,n>3").unwrap();
        let good = labels(&[("app", "web"), ("zone", "a"), ("n", "4")]);
        assert!(s.matches(&good));
        let mut bad = good.clone();
        bad.insert("env".into(), "dev".into());
        assert!(!s.matches(&bad));
        let mut bad = good.clone();
        bad.insert("gone".into(), String::new());
        assert!(!s.matches(&bad));
        let mut bad = good.clone();
        bad.insert("n".into(), "three".into());
        assert!(!s.matches(&bad), "a non-integer never satisfies >");
        let notin = LabelSelector::parse("x notin (c)").unwrap();
        assert!(
            notin.matches(&labels(&[])),
            "notin holds for an absent label"
        );
        let empty = LabelSelector::parse("x in ()").unwrap();
        assert!(empty.matches(&labels(&[("x", "")])));
    }

    #[test]
    fn errors_point_at_the_offending_token() {
        let cases = [
            ("app=web,", 8, "expected a label key"),
            ("app=we b", 7, "expected `,` between requirements"),
            ("Bad_Prefix/x=1", 0, "the prefix before `/`"),
            ("-app=1", 0, "invalid label key `-app`"),
            ("app=-x", 4, "invalid label value `-x`"),
            ("zone in a", 8, "expected `(`"),
            ("zone in (a", 10, "expected `)`"),
            ("n>three", 2, "expected an integer"),
            ("app (x)", 4, "expected an operator"),
            ("!app=1", 4, "expected `,` between requirements"),
        ];
        for (text, at, want) in cases {
            let e = LabelSelector::parse(text).expect_err(text);
            assert_eq!(e.at, at, "{text}: {e}");
            assert!(e.message.contains(want), "{text}: {e}");
        }
        let long = format!("k={}", "v".repeat(64));
        assert!(LabelSelector::parse(&long).is_err());
    }
}

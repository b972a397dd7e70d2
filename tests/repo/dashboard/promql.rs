//! The metric names a PromQL expression reads, found by a small tokenizer: enough for the
//! expressions of a dashboard and alert rules, not a parser (promtool checks that they parse).
//!
//! A metric name is an identifier that is not a function or aggregation (followed by `(`),
//! not a keyword, and not a label name: label matchers (`{…}`), ranges (`[…]`), strings and
//! the label lists of `by`, `without`, `on`, `ignoring`, `group_left` and `group_right` are
//! skipped whole.

/// One metric a query reads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Use {
    /// The metric name as written (`…_bucket` for a histogram's buckets).
    pub name: String,
    /// The innermost function or aggregation whose argument it is (`rate`, `sum`), or empty.
    pub function: String,
}

/// Aggregation operators: they may be followed by `by`/`without` before their `(`.
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

/// Keywords that are neither metrics nor functions.
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
];

/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Every metric `expr` reads, in order of appearance.
pub fn metric_uses(expr: &str) -> Vec<Use> {
    let s: Vec<char> = expr.chars().collect();
    let mut uses = Vec::new();
    // The function of each open parenthesis; `pending` is a function name waiting for its `(`.
    let mut stack: Vec<String> = Vec::new();
    let mut pending = String::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&s, i),
            '{' => i = skip_group(&s, i, '{', '}'),
            '[' => i = skip_group(&s, i, '[', ']'),
            '#' => {
                i = s[i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(s.len(), |n| i + n)
            }
            '(' => {
                stack.push(std::mem::take(&mut pending));
                i += 1;
            }
            ')' => {
                stack.pop();
                i += 1;
            }
            c if c.is_ascii_digit()
                || (c == '.' && s.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                // Numbers and durations (`5m`, `1e3`, `0x1f`).
                while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == '.') {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == '_' || s[i] == ':') {
                    i += 1;
                }
                let word: String = s[start..i].iter().collect();
                let next = skip_space(&s, i);
                if LABEL_LISTS.contains(&word.as_str()) {
                    if s.get(next) == Some(&'(') {
                        i = skip_group(&s, next, '(', ')');
                    }
                } else if AGGREGATIONS.contains(&word.as_str()) || s.get(next) == Some(&'(') {
                    pending = word;
                } else if !KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) {
                    let function = stack.iter().rev().find(|f| !f.is_empty()).cloned();
                    uses.push(Use {
                        name: word,
                        function: function.unwrap_or_default(),
                    });
                }
            }
            _ => i += 1,
        }
    }
    uses
}

fn skip_space(s: &[char], mut i: usize) -> usize {
    while i < s.len() && s[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The index after the string starting at `i` (its quote character ends it; `\` escapes).
fn skip_string(s: &[char], i: usize) -> usize {
    let quote = s[i];
    let mut j = i + 1;
    while j < s.len() && s[j] != quote {
        j += if s[j] == '\\' && quote != '`' { 2 } else { 1 };
    }
    j + 1
}

/// The index after the group opened at `i`, strings inside skipped whole.
fn skip_group(s: &[char], i: usize, open: char, close: char) -> usize {
    let mut depth = 0;
    let mut j = i;
    while j < s.len() {
        match s[j] {
            '"' | '\'' | '`' => {
                j = skip_string(s, j);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<(String, String)> {
        metric_uses(expr)
            .into_iter()
            .map(|u| (u.name, u.function))
            .collect()
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_histogram_quantile_reads_the_buckets_under_rate_and_skips_labels_and_ranges() {
        let expr = r#"histogram_quantile(0.99, sum by (le, controller) (rate(x_bucket{controller=~"a|b", job="j"}[5m])))"#;
        assert_eq!(names(expr), owned(&[("x_bucket", "rate")]));
    }

    #[test]
    fn binary_operators_with_matching_clauses_read_both_sides() {
        let expr = "(time() - a > 900) and on (instance, job) increase(b_total[15m]) > 0 unless ignoring(x) group_left(y) c offset 5m";
        assert_eq!(
            names(expr),
            owned(&[("a", ""), ("b_total", "increase"), ("c", "")])
        );
    }

    #[test]
    fn aggregations_with_the_clause_after_the_argument_and_bare_selectors() {
        assert_eq!(
            names("sum(rate(a[1m])) by (controller) / count without (x) (b) + up == bool 1"),
            owned(&[("a", "rate"), ("b", "count"), ("up", "")])
        );
    }

    #[test]
    fn strings_comments_numbers_and_keywords_are_not_metrics() {
        assert_eq!(
            names(
                "label_replace(m, \"dst\", \"$1 rate(x)\", \"src\", \"(.*)\") * 1e3 + .5 + Inf # c d\n"
            ),
            owned(&[("m", "label_replace")])
        );
    }

    #[test]
    fn a_metric_name_with_colons_is_one_name() {
        assert_eq!(
            names("job:edgenetd_up:sum"),
            owned(&[("job:edgenetd_up:sum", "")])
        );
    }
}

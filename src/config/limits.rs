//! What reading a config may cost, checked before toml's parser sees a byte.
//!
//! toml's parser builds its whole tree at once and, for dense values (`k = [1,1,…]`), holds
//! about 77 bytes per byte of input: one 52 MB line took `check` to 3.9 GB and 9.5 s, and a
//! router has 256 MiB–1 GiB (`ExecReload=` runs `check` in the unit's cgroup). So a file is
//! refused by its size before it is read (metadata, then counted while reading, in case it
//! grows), all files of one load together too, and a file nested deeper than anything
//! edgenetd reads is refused by a cheap scan before it is parsed.
//!
//! The limits sit well above real configs: the route benchmark's 100,000 `[[route]]` entries
//! are 5.0 MB (6.3 MB as `/32` routes with `via` and `dev`), and the deepest place edgenetd
//! reads is 5 levels down. docs/operations.md states them ("Limits of a config").

/// The largest config file read, in bytes: 16 MiB, about 260,000 `[[route]]` entries.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The largest total of one load (the main file and every `conf.d/*.toml`), in bytes.
pub const MAX_TOTAL_BYTES: u64 = 32 << 20;

/// The largest data file a config names (`loadfile` of a `[policy.set.*]`), in bytes: 8 MiB,
/// about 550,000 IPv4 addresses one a line. Never parsed as TOML, so it costs its text and
/// its elements, not toml's tree; but it is kept in `last-good.json` too, and the unit's
/// `MemoryMax=128M` holds all of it.
pub const MAX_DATA_FILE_BYTES: u64 = 8 << 20;

/// The largest total of the data files of one load, in bytes.
pub const MAX_DATA_TOTAL_BYTES: u64 = 16 << 20;

/// The deepest nesting accepted: table header and dotted key segments, arrays and inline
/// tables, counted together. Below toml's own limit (80 of each), so this message comes first.
pub const MAX_DEPTH: usize = 32;

/// The most weight one load hands to toml's parser whole (see [`weigh`]: a table 10, an array
/// 3, a key 2, an array element 1). toml's tree holds roughly 120–170 bytes per unit at the
/// parse's peak (measured on dense arrays, `[[x]]` tables, inline tables, long tables of keys),
/// so this keeps one load near 80 MiB, under the unit's `MemoryMax=128M`. The `[[route]]`
/// entries of a file's tail are read one at a time and not weighed.
pub const MAX_PARSE_WEIGHT: usize = 500_000;

/// What one table costs toml (a map of its own, ~1.4 KiB), in units of [`MAX_PARSE_WEIGHT`].
pub const TABLE_WEIGHT: usize = 10;
/// What one array costs (~440 bytes).
pub const ARRAY_WEIGHT: usize = 3;
/// What one `key = value` costs (the key and its value in a map).
pub const KEY_WEIGHT: usize = 2;
/// What one more array element costs.
pub const ELEMENT_WEIGHT: usize = 1;

/// One load's allowance of weight parsed whole, charged file by file (and, on the fast path,
/// the head), before each is parsed.
#[derive(Debug, Default, Clone, Copy)]
pub struct ParseBudget {
    /// Weight charged so far in this load.
    used: usize,
}

impl ParseBudget {
    /// Charges the weight of `text` when it fits; otherwise charges nothing and returns the
    /// offset in `text` where the allowance runs out.
    pub fn charge(&mut self, text: &str) -> Result<(), usize> {
        self.used += self.fits(text)?;
        Ok(())
    }

    /// Whether `text`, parsed and dropped again (one `[[route]]` block), fits beside what is
    /// charged: its weight, or the offset where the allowance runs out.
    pub fn fits(&self, text: &str) -> Result<usize, usize> {
        weigh(text, MAX_PARSE_WEIGHT - self.used)
    }

    /// Weight charged so far.
    pub fn used(&self) -> usize {
        self.used
    }
}

/// Why a text is not parsed: at its offset the weight parsed whole in this load passes
/// [`MAX_PARSE_WEIGHT`], `before` of it in the texts before it.
pub fn weight_message(before: usize) -> String {
    format!(
        "more than {} of weight for toml to parse whole in one load (a table weighs {TABLE_WEIGHT}, an array {ARRAY_WEIGHT}, a key {KEY_WEIGHT}, an array element {ELEMENT_WEIGHT}){}; the file was not parsed (see \"Limits of a config\" in docs/operations.md: `[[route]]` entries at the end of a file are not weighed)",
        grouped(MAX_PARSE_WEIGHT as u64),
        if before > 0 {
            format!(", {} of it in the files before", grouped(before as u64))
        } else {
            String::new()
        }
    )
}

/// The weight of `text` for toml's parser: each table (a header, `{`) [`TABLE_WEIGHT`], each
/// array [`ARRAY_WEIGHT`], each `=` [`KEY_WEIGHT`], each `,` [`ELEMENT_WEIGHT`] (a trailing
/// comma counts once too often, which errs on the safe side); strings and comments weigh
/// nothing more. `Err` with the offset where the weight passes `allowed`.
///
/// Not a parser: like [`too_deep`] it knows strings, comments and headers well enough; on text
/// that is not TOML it may be off, and the parser then reports that text.
pub fn weigh(text: &str, allowed: usize) -> Result<usize, usize> {
    let b = text.as_bytes();
    let mut weight = 0;
    // Open arrays and inline tables: a `[` inside one, or after `=`, is an array.
    let mut open = 0usize;
    let mut line_start = true;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let add = match c {
            b'#' => {
                i = skip_line(b, i);
                continue;
            }
            b'"' | b'\'' => {
                line_start = false;
                i = skip_string(b, i);
                continue;
            }
            b'\n' => {
                line_start = open == 0;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'[' if line_start => {
                // A table header (`[[key]]` too): one table, past its closing bracket(s).
                line_start = false;
                if weight + TABLE_WEIGHT > allowed {
                    return Err(i);
                }
                weight += TABLE_WEIGHT;
                i = header(b, i).0;
                continue;
            }
            b'[' => {
                open += 1;
                ARRAY_WEIGHT
            }
            b'{' => {
                open += 1;
                TABLE_WEIGHT
            }
            b']' | b'}' => {
                open = open.saturating_sub(1);
                0
            }
            b'=' => KEY_WEIGHT,
            b',' => ELEMENT_WEIGHT,
            _ => 0,
        };
        line_start = false;
        if weight + add > allowed {
            return Err(i);
        }
        weight += add;
        i += 1;
    }
    Ok(weight)
}

/// Why a file is not read: it is `size` bytes (`at_least`: or more, as it grew while it was
/// read), over [`MAX_FILE_BYTES`] alone or over [`MAX_TOTAL_BYTES`] with the `before` bytes of
/// the files read before it.
pub fn size_message(size: u64, at_least: bool, before: u64) -> String {
    let size_text = format!(
        "the file is {}{} bytes",
        if at_least { "at least " } else { "" },
        grouped(size)
    );
    let what = if size > MAX_FILE_BYTES {
        format!(
            "{size_text}, over the limit of {} bytes ({} MiB) for one config file by {} bytes",
            grouped(MAX_FILE_BYTES),
            MAX_FILE_BYTES >> 20,
            grouped(size - MAX_FILE_BYTES)
        )
    } else {
        format!(
            "{size_text}; with the {} bytes of the files before it, over the limit of {} bytes ({} MiB) for all config files of one load by {} bytes",
            grouped(before),
            grouped(MAX_TOTAL_BYTES),
            MAX_TOTAL_BYTES >> 20,
            grouped((before + size).saturating_sub(MAX_TOTAL_BYTES))
        )
    };
    format!("{what}; it was not read (see \"Limits of a config\" in docs/operations.md)")
}

/// Why a data file is not read: it is `size` bytes (`at_least`: or more), over
/// [`MAX_DATA_FILE_BYTES`] alone or over [`MAX_DATA_TOTAL_BYTES`] with the `before` bytes of
/// the data files read before it.
pub fn data_size_message(size: u64, at_least: bool, before: u64) -> String {
    let size_text = format!(
        "the data file is {}{} bytes",
        if at_least { "at least " } else { "" },
        grouped(size)
    );
    let what = if size > MAX_DATA_FILE_BYTES {
        format!(
            "{size_text}, over the limit of {} bytes ({} MiB) for one data file",
            grouped(MAX_DATA_FILE_BYTES),
            MAX_DATA_FILE_BYTES >> 20
        )
    } else {
        format!(
            "{size_text}; with the {} bytes of the data files before it, over the limit of {} bytes ({} MiB) for all data files of one load",
            grouped(before),
            grouped(MAX_DATA_TOTAL_BYTES),
            MAX_DATA_TOTAL_BYTES >> 20
        )
    };
    format!("{what}; it was not read (see \"Limits of a config\" in docs/operations.md)")
}

/// How many bytes the next data file may have, after `before` bytes of data files read.
pub fn data_budget(before: u64) -> u64 {
    MAX_DATA_FILE_BYTES.min(MAX_DATA_TOTAL_BYTES.saturating_sub(before))
}

/// How many bytes the next file may have, after `before` bytes of files read.
pub fn budget(before: u64) -> u64 {
    MAX_FILE_BYTES.min(MAX_TOTAL_BYTES.saturating_sub(before))
}

/// Why a file is not parsed: somewhere it nests deeper than [`MAX_DEPTH`].
pub fn depth_message() -> String {
    format!(
        "nested more than {MAX_DEPTH} deep (tables, dotted keys, arrays and inline tables counted together); the file was not parsed (see \"Limits of a config\" in docs/operations.md)"
    )
}

/// `n` with thousands separators, as the figures of the messages are read by people.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Where in `text` the nesting first goes past [`MAX_DEPTH`], as a byte offset; `None` when it
/// never does.
///
/// Not a parser: it knows strings (all four kinds), comments, headers, keys and brackets well
/// enough that brackets and dots inside strings or comments are not counted. On text that is
/// not TOML it may be wrong either way; the parser then reports that text.
pub fn too_deep(text: &str) -> Option<usize> {
    Scan::default().run(text.as_bytes())
}

/// One open array or inline table.
#[derive(Clone, Copy)]
struct Frame {
    /// `{`: keys are read in it.
    table: bool,
    /// The segments of the key being read in it (inline tables only).
    key: usize,
}

#[derive(Default)]
struct Scan {
    /// The open arrays and inline tables (never more than [`MAX_DEPTH`]: the scan stops).
    frames: Vec<Frame>,
    /// The segments of the last table header.
    header: usize,
    /// The segments of the top-level key being read.
    key: usize,
    /// Reading a key (at a line start, after `{` or after `,` in an inline table).
    in_key: bool,
    /// The current key already has a segment started (so the next one needs a `.`).
    segment: bool,
}

impl Scan {
    fn depth(&self) -> usize {
        self.header + self.key + self.frames.iter().map(|f| 1 + f.key).sum::<usize>()
    }

    fn run(mut self, b: &[u8]) -> Option<usize> {
        let mut i = 0;
        self.line_start();
        while i < b.len() {
            let c = b[i];
            match c {
                b'#' => {
                    i = skip_line(b, i);
                    continue;
                }
                b'"' | b'\'' => {
                    if self.in_key && self.segment_start() {
                        return Some(i);
                    }
                    i = skip_string(b, i);
                    continue;
                }
                b'\n' if self.frames.is_empty() => self.line_start(),
                b'[' if self.in_key && self.frames.is_empty() && !self.segment => {
                    // A table header: its segments, up to `]` (`]]`).
                    let (end, segments) = header(b, i);
                    if segments > MAX_DEPTH {
                        return Some(i);
                    }
                    self.header = segments;
                    self.in_key = false;
                    i = end;
                    continue;
                }
                b'[' | b'{' if !self.in_key => {
                    self.frames.push(Frame {
                        table: c == b'{',
                        key: 0,
                    });
                    if self.depth() > MAX_DEPTH {
                        return Some(i);
                    }
                    if c == b'{' {
                        self.in_key = true;
                        self.segment = false;
                    }
                }
                b']' | b'}' => {
                    self.frames.pop();
                    self.in_key = false;
                }
                b',' => {
                    if let Some(top) = self.frames.last_mut()
                        && top.table
                    {
                        top.key = 0;
                        self.in_key = true;
                        self.segment = false;
                    }
                }
                b'=' if self.in_key => self.in_key = false,
                b'.' if self.in_key => self.segment = false,
                b' ' | b'\t' | b'\r' => {}
                _ if self.in_key => {
                    if self.segment_start() {
                        return Some(i);
                    }
                    // The rest of a bare key.
                    while i + 1 < b.len() && is_bare(b[i + 1]) {
                        i += 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// A new line at the top level: a key (or a header) comes next.
    fn line_start(&mut self) {
        self.key = 0;
        self.in_key = true;
        self.segment = false;
    }

    /// A key segment begins; true when that is one level too deep.
    fn segment_start(&mut self) -> bool {
        if self.segment {
            return false;
        }
        self.segment = true;
        match self.frames.last_mut() {
            Some(top) => top.key += 1,
            None => self.key += 1,
        }
        self.depth() > MAX_DEPTH
    }
}

fn is_bare(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// The offset of the newline that ends the line `i` is on (or the end).
fn skip_line(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|c| *c == b'\n')
        .map_or(b.len(), |n| i + n)
}

/// The offset just past the string that starts at `i` (or the end of its line, or of the
/// text, when it is not closed: the parser reports that).
fn skip_string(b: &[u8], i: usize) -> usize {
    let quote = b[i];
    let basic = quote == b'"';
    if b[i..].starts_with(&[quote; 3]) {
        let mut j = i + 3;
        while j < b.len() {
            if basic && b[j] == b'\\' {
                j += 2;
                continue;
            }
            if b[j..].starts_with(&[quote; 3]) {
                // Up to two more quotes belong to the content (`""""` ends with one inside).
                let mut end = j + 3;
                while end < b.len() && end < j + 5 && b[end] == quote {
                    end += 1;
                }
                return end;
            }
            j += 1;
        }
        return b.len();
    }
    let mut j = i + 1;
    while j < b.len() && b[j] != b'\n' {
        if basic && b[j] == b'\\' {
            j += 2;
            continue;
        }
        if b[j] == quote {
            return j + 1;
        }
        j += 1;
    }
    j.min(b.len())
}

/// A table header at `i` (`[` or `[[`): the offset past its closing bracket(s) and its number
/// of key segments.
fn header(b: &[u8], i: usize) -> (usize, usize) {
    let mut j = i + 1;
    let mut segments = 0;
    let mut segment = false;
    while j < b.len() && b[j] != b'\n' {
        match b[j] {
            b'"' | b'\'' => {
                if !segment {
                    segments += 1;
                    segment = true;
                }
                j = skip_string(b, j);
                continue;
            }
            b'.' => segment = false,
            b']' => {
                while j < b.len() && b[j] == b']' {
                    j += 1;
                }
                return (j, segments);
            }
            b'[' | b' ' | b'\t' => {}
            _ => {
                if !segment {
                    segments += 1;
                    segment = true;
                }
            }
        }
        j += 1;
    }
    (j, segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str) -> bool {
        too_deep(text).is_none()
    }

    #[test]
    fn strings_comments_and_headers_weigh_what_toml_builds_of_them() {
        // A header is one table, whatever its brackets and dots; strings and comments add
        // nothing, whatever they hold.
        assert_eq!(weigh("[a.\"b[,]\".c]\n", usize::MAX), Ok(TABLE_WEIGHT));
        assert_eq!(weigh("[[route]]\n", usize::MAX), Ok(TABLE_WEIGHT));
        assert_eq!(
            weigh("k = \"[{,=}]\" # [{,=}]\n", usize::MAX),
            Ok(KEY_WEIGHT)
        );
        assert_eq!(
            weigh("k = '''\n[x]\n,,,\n'''\n", usize::MAX),
            Ok(KEY_WEIGHT)
        );
        // An array opened on one line and continued on the next: its `[` are arrays.
        assert_eq!(
            weigh("k = [\n  [1, 2],\n  [3],\n]\n", usize::MAX),
            Ok(KEY_WEIGHT + 3 * ARRAY_WEIGHT + 3 * ELEMENT_WEIGHT)
        );
        assert_eq!(
            weigh("k = { a = 1, b = [] }\n", usize::MAX),
            Ok(3 * KEY_WEIGHT + TABLE_WEIGHT + ELEMENT_WEIGHT + ARRAY_WEIGHT)
        );
    }

    #[test]
    fn the_weight_stops_where_it_passes_the_allowance() {
        let text = "a = 1\nb = 2\nc = 3\n";
        assert_eq!(weigh(text, 6), Ok(6));
        assert_eq!(weigh(text, 5), Err(text.rfind('=').unwrap()));
        let mut budget = ParseBudget::default();
        budget.charge(text).unwrap();
        assert_eq!(budget.used(), 6);
        // A refused text charges nothing.
        let big = "k = 1\n".repeat(MAX_PARSE_WEIGHT / KEY_WEIGHT);
        assert!(budget.charge(&big).is_err());
        assert_eq!(budget.used(), 6);
    }

    #[test]
    fn real_configs_are_far_from_the_depth_limit() {
        let text = r#"
[daemon]
listen = "127.0.0.1:9750"
[policy.zone.lan.rules."allow ssh"]
match = { tcp = { ports = [[22, 23], [80, 81]] } }
[[route]]
to = "10.0.0.0/8" # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
via = "192.0.2.1"
"#;
        assert!(depth_ok(text));
    }

    #[test]
    fn brackets_in_strings_and_comments_are_not_nesting() {
        let deep = "[".repeat(200);
        for text in [
            format!("k = \"{deep}\"\n"),
            format!("k = '{deep}'\n"),
            format!("k = \"\"\"\n{deep}\n\"\"\"\n"),
            format!("k = '''\n{deep}\n'''\n"),
            format!("k = \"\\\"{deep}\"\n"),
            format!("# {deep}\nk = 1\n"),
            format!("k = [1] # {deep}\n"),
            format!("\"{}\" = 1\n", ".".repeat(200)),
            format!("[\"{}\"]\n", ".".repeat(200)),
        ] {
            assert!(depth_ok(&text), "{text}");
        }
    }

    #[test]
    fn nesting_past_the_limit_is_found_where_it_goes_past() {
        let n = MAX_DEPTH + 1;
        let arrays = format!("k = {}{}\n", "[".repeat(n), "]".repeat(n));
        // `k` is one level, so the array that goes past the limit is the 32nd.
        assert_eq!(too_deep(&arrays), Some(4 + MAX_DEPTH - 1));
        assert!(depth_ok(&format!(
            "k = {}{}\n",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        )));
        let inline = format!("k = {}1{}\n", "{a=".repeat(n), "}".repeat(n));
        assert!(too_deep(&inline).is_some());
        let dotted = format!("{} = 1\n", vec!["a"; n].join("."));
        assert!(too_deep(&dotted).is_some());
        assert!(depth_ok(&format!(
            "{} = 1\n",
            vec!["a"; MAX_DEPTH].join(".")
        )));
        let header = format!("[{}]\nk = 1\n", vec!["a"; n].join("."));
        assert_eq!(too_deep(&header), Some(0));
        // Header and key and value add up.
        let mixed = format!(
            "[{}]\n{} = [[1]]\n",
            ["a"; 10].join("."),
            ["b"; 21].join(".")
        );
        assert!(too_deep(&mixed).is_some());
        // An unclosed string or a stray bracket does not make the scan panic.
        for text in ["k = \"[[[", "k = '''[[[", "]]]}}}", "[[a", "k = [\"\\"] {
            let _ = too_deep(text);
        }
    }

    #[test]
    fn each_line_and_each_inline_table_entry_starts_a_new_key() {
        let keys = (0..1000)
            .map(|i| format!("a{i}.b.c = 1\n"))
            .collect::<String>();
        assert!(depth_ok(&keys));
        let entries = (0..1000)
            .map(|i| format!("a{i}.b.c = 1"))
            .collect::<Vec<_>>()
            .join(", ");
        assert!(depth_ok(&format!("k = {{ {entries} }}\n")));
        let values = vec!["[1]"; 1000].join(", ");
        assert!(depth_ok(&format!("k = [{values}]\n")));
    }

    #[test]
    fn figures_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(52_428_812), "52,428,812");
    }
}

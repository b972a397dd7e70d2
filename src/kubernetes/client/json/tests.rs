use super::*;

/// A test object: every kind of field the decoders read.
#[derive(Debug, Default)]
struct Sample {
    a: String,
    missing: i32,
    n: Option<i32>,
    l: Vec<String>,
    b: Option<bool>,
    s: Option<i64>,
}

impl Decode for Sample {
    fn decode(r: &mut Reader<'_>) -> Result<Sample> {
        let mut s = Sample::default();
        r.object(&mut |r, key| {
            match key {
                "a" => s.a = r.str()?,
                "missing" => s.missing = r.i32()?,
                "n" => s.n = r.opt_i32()?,
                "l" => s.l = r.strings()?,
                "o" => r.object(&mut |r, key| match key {
                    "b" => {
                        s.b = r.opt_bool()?;
                        Ok(())
                    }
                    _ => r.skip(),
                })?,
                "s" => s.s = r.opt_int()?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(s)
    }
}

#[test]
fn missing_and_null_fields_read_as_defaults_and_wrong_types_name_the_field() {
    let s: Sample = from_slice(
        br#"{"a": null, "n": 7, "l": ["p"], "o": {"b": true, "x": [1, {"y": null}]}, "u": "x"}"#,
    )
    .unwrap();
    assert_eq!(s.a, "");
    assert_eq!(s.missing, 0);
    assert_eq!(s.n, Some(7));
    assert_eq!(s.l, ["p"]);
    assert_eq!(s.b, Some(true));
    assert_eq!(s.s, None);
    let err = from_slice::<Sample>(br#"{"s": "x"}"#).unwrap_err();
    assert_eq!(err, "s: expected an integer, found a string");
    let err = from_slice::<Sample>(format!(r#"{{"n": {}}}"#, 1u64 << 40).as_bytes()).unwrap_err();
    assert!(err.contains("n: 1099511627776 out of range"), "{err}");
    let err = from_slice::<Sample>(br#"{"s": 7.5}"#).unwrap_err();
    assert_eq!(err, "s: 7.5 is not an integer");
    let err = from_slice::<Sample>(br#"{"l": "p"}"#).unwrap_err();
    assert_eq!(err, "l: expected a list, found a string");
    let err = from_slice::<Sample>(br#"{"l": ["p", 3]}"#).unwrap_err();
    assert_eq!(err, "l[1]: expected a string, found a number");
    let err = from_slice::<Sample>(br#"{"o": {"b": "yes"}}"#).unwrap_err();
    assert_eq!(err, "o.b: expected a boolean, found a string");
    assert!(from_slice::<Sample>(b"[1]").is_err());
    // An object may be null (all defaults); a repeated field reads as its last value.
    assert_eq!(from_slice::<Sample>(b" null ").unwrap().a, "");
    assert_eq!(
        from_slice::<Sample>(br#"{"n": 1, "n": 2}"#).unwrap().n,
        Some(2)
    );
}

#[test]
fn strings_unescape_and_join_surrogate_pairs() {
    let mut r = Reader::new(br#""a\"b\\c\/\n\u00e9\ud83d\ude00""#);
    assert_eq!(r.str().unwrap(), "a\"b\\c/\n\u{e9}\u{1F600}");
    for bad in [
        &br#""\ud83d""#[..],
        br#""\x""#,
        br#""abc"#,
        b"\"a\x01\"",
        b"\"\xff\"",
    ] {
        assert!(
            Reader::new(bad).str().is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn skipping_checks_the_grammar_and_bounds_the_depth() {
    for good in [
        &br#"{"a": [1, -2.5e3, true, false, null, "x\"y", {}]}"#[..],
        b"[]",
        b"0",
    ] {
        let mut r = Reader::new(good);
        r.skip().unwrap();
        r.end().unwrap();
    }
    for bad in [
        &b"{\"a\" 1}"[..],
        b"[1 2]",
        b"01",
        b"1.",
        b"-",
        b"tru",
        b"{\"a\":1,}",
        b"[",
        b"}",
    ] {
        let mut r = Reader::new(bad);
        assert!(
            r.skip().and_then(|()| r.end()).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert!(
        Reader::new(deep.as_bytes())
            .skip()
            .unwrap_err()
            .contains("nested too deep")
    );
    let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
    Reader::new(ok.as_bytes()).skip().unwrap();
}

#[test]
fn raw_returns_a_values_text_and_leaves_the_reader_after_it() {
    let mut r = Reader::new(br#"{"x": {"big": [1, 2]} , "y": 3}"#);
    let mut raw = Vec::new();
    let mut y = None;
    r.object(&mut |r, key| {
        match key {
            "x" => raw = r.raw()?.to_vec(),
            "y" => y = r.opt_int()?,
            _ => r.skip()?,
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(raw, br#"{"big": [1, 2]}"#);
    assert_eq!(y, Some(3));
}

/// The reader accepts exactly what serde_json accepts: every one-byte change of a few
/// documents (a byte dropped, or replaced by one of JSON's significant characters) is checked
/// against serde_json's verdict.
#[test]
fn the_grammar_agrees_with_serde_json_on_every_one_byte_change() {
    let docs: [&[u8]; 3] = [
        br#"{"a": [1, -2.5e+3, true, false, null], "b\"\u00e9": {"c": "x\ny", "d": []}}"#,
        br#"[0, 10, -0.5E-2, "\/\b\f\r\t", {"": {}}]"#,
        b" \t\r\n{\"k\" : \"v\" } ",
    ];
    let replacements = b"{}[]:,\"\\ 0-.eEuntfl1x";
    let mut checked = 0;
    for doc in docs {
        for at in 0..doc.len() {
            let mut variants = vec![[&doc[..at], &doc[at + 1..]].concat()];
            for &b in replacements {
                let mut v = doc.to_vec();
                v[at] = b;
                variants.push(v);
            }
            for v in variants {
                let ours = {
                    let mut r = Reader::new(&v);
                    r.skip().and_then(|()| r.end()).is_ok()
                };
                let theirs = serde_json::from_slice::<serde::de::IgnoredAny>(&v).is_ok();
                assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(&v));
                checked += 1;
            }
        }
    }
    assert!(checked > 2000, "{checked}");
}

//! Reading API objects field by field out of a parsed JSON value.
//!
//! Each object is parsed into a `serde_json::Value` (one object at a time: a list page's items
//! are read one by one), and the fields edgenetd uses are taken out of it by plain functions;
//! the rest is dropped with the value. This replaces serde's derived decoders, which generate
//! code per struct and per deserializer (and again for every buffered watch event): on the
//! aarch64 build that was over 100 kB for twenty lean structs, against about 20 kB here.
//!
//! The conventions of the derived structs are kept: unknown fields are ignored, a missing
//! field and an explicit `null` both read as the default, and a field of the wrong JSON type
//! is an error naming the field.

use std::collections::BTreeMap;

use serde::de::{Deserialize, Deserializer, Error as _};
use serde_json::{Map, Value};

/// What is wrong with an object (the field's path and what was expected).
pub type Result<T> = std::result::Result<T, String>;

/// A JSON object whose fields are taken out one by one.
#[derive(Debug, Default)]
pub struct Fields(Map<String, Value>);

/// Decodes a value with `from_fields`: the body of every object's `Deserialize` impl.
pub fn decode<'de, D, T>(
    d: D,
    from_fields: fn(Fields) -> Result<T>,
) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let value = Value::deserialize(d)?;
    Fields::new(value)
        .and_then(from_fields)
        .map_err(D::Error::custom)
}

/// The JSON type of `v`, for errors.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The error for `key` holding `v` where `expected` belongs.
fn wrong(key: &str, expected: &str, v: &Value) -> String {
    format!("{key}: expected {expected}, found {}", type_of(v))
}

/// A string value.
fn string(key: &str, v: Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s),
        v => Err(wrong(key, "a string", &v)),
    }
}

impl Fields {
    /// `v` as an object; `null` reads as an empty one.
    pub fn new(v: Value) -> Result<Fields> {
        match v {
            Value::Object(map) => Ok(Fields(map)),
            Value::Null => Ok(Fields::default()),
            v => Err(format!("expected an object, found {}", type_of(&v))),
        }
    }

    /// The field's value, `None` when missing or `null`.
    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key).filter(|v| !v.is_null())
    }

    /// A string field.
    pub fn opt_str(&mut self, key: &str) -> Result<Option<String>> {
        self.take(key).map(|v| string(key, v)).transpose()
    }

    /// A string field; missing = empty.
    pub fn str(&mut self, key: &str) -> Result<String> {
        Ok(self.opt_str(key)?.unwrap_or_default())
    }

    /// An integer field.
    pub fn opt_int(&mut self, key: &str) -> Result<Option<i64>> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .map(Some)
                .ok_or_else(|| format!("{key}: {n} is not an integer")),
            Some(v) => Err(wrong(key, "an integer", &v)),
        }
    }

    /// A 32-bit integer field.
    pub fn opt_i32(&mut self, key: &str) -> Result<Option<i32>> {
        self.opt_int(key)?
            .map(|n| i32::try_from(n).map_err(|_| format!("{key}: {n} out of range")))
            .transpose()
    }

    /// A 32-bit integer field; missing = 0.
    pub fn i32(&mut self, key: &str) -> Result<i32> {
        Ok(self.opt_i32(key)?.unwrap_or(0))
    }

    /// A boolean field.
    pub fn opt_bool(&mut self, key: &str) -> Result<Option<bool>> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(v) => Err(wrong(key, "a boolean", &v)),
        }
    }

    /// An object field; missing = empty.
    pub fn obj(&mut self, key: &str) -> Result<Fields> {
        Ok(self.opt_obj(key)?.unwrap_or_default())
    }

    /// An object field.
    pub fn opt_obj(&mut self, key: &str) -> Result<Option<Fields>> {
        self.take(key)
            .map(|v| Fields::new(v).map_err(|e| format!("{key}: {e}")))
            .transpose()
    }

    /// An object field decoded with `f`.
    pub fn opt_with<T>(&mut self, key: &str, f: fn(Fields) -> Result<T>) -> Result<Option<T>> {
        self.opt_obj(key)?
            .map(|o| f(o).map_err(|e| format!("{key}.{e}")))
            .transpose()
    }

    /// An object field decoded with `f`; missing = `f` of an empty object.
    pub fn with<T>(&mut self, key: &str, f: fn(Fields) -> Result<T>) -> Result<T> {
        f(self.obj(key)?).map_err(|e| format!("{key}.{e}"))
    }

    /// A list field, each element read by `f`; missing = empty.
    fn list<T>(&mut self, key: &str, f: impl Fn(Value) -> Result<T>) -> Result<Vec<T>> {
        match self.take(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(f)
                .collect::<Result<Vec<T>>>()
                .map_err(|e| format!("{key}[]: {e}")),
            Some(v) => Err(wrong(key, "a list", &v)),
        }
    }

    /// A list of strings; missing = empty.
    pub fn strings(&mut self, key: &str) -> Result<Vec<String>> {
        self.list(key, |v| string("element", v))
    }

    /// A list of strings, `None` when missing.
    pub fn opt_strings(&mut self, key: &str) -> Result<Option<Vec<String>>> {
        if self.0.get(key).is_none_or(Value::is_null) {
            return Ok(None);
        }
        self.strings(key).map(Some)
    }

    /// A list of objects, each decoded by `f`; missing = empty.
    pub fn objects<T>(&mut self, key: &str, f: fn(Fields) -> Result<T>) -> Result<Vec<T>> {
        self.list(key, |v| Fields::new(v).and_then(f))
    }

    /// A map of strings to strings, keeping the keys `keep` accepts; missing = empty.
    pub fn string_map(
        &mut self,
        key: &str,
        keep: fn(&str) -> bool,
    ) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for (k, v) in self.obj(key)?.0 {
            if keep(&k) {
                out.insert(k, string(key, v)?);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_null_fields_read_as_defaults_and_wrong_types_name_the_field() {
        let v = serde_json::json!({"a": null, "n": 7, "s": "x", "l": ["p"], "o": {"b": true}});
        let mut f = Fields::new(v).unwrap();
        assert_eq!(f.str("a").unwrap(), "");
        assert_eq!(f.i32("missing").unwrap(), 0);
        assert_eq!(f.opt_i32("n").unwrap(), Some(7));
        assert_eq!(f.strings("l").unwrap(), ["p"]);
        assert_eq!(f.obj("o").unwrap().opt_bool("b").unwrap(), Some(true));
        let err = f.opt_int("s").unwrap_err();
        assert!(err.contains("s: expected an integer"), "{err}");
        let mut f = Fields::new(serde_json::json!({"n": 1u64 << 40, "l": "p"})).unwrap();
        assert!(f.opt_i32("n").unwrap_err().contains("out of range"));
        assert!(f.strings("l").unwrap_err().contains("expected a list"));
        assert!(Fields::new(serde_json::json!([1])).is_err());
    }
}

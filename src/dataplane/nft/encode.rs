//! Byte encodings of constants and set elements, as the kernel stores them.

use std::net::IpAddr;

use super::error::CompileError;
use super::ir::*;

/// Encodes a constant at its natural length (a concatenation pads each part to 4 bytes).
pub fn encode(v: &Value) -> Result<Vec<u8>, CompileError> {
    let mut out = Vec::with_capacity(16);
    encode_into(&mut out, v)?;
    Ok(out)
}

fn encode_into(out: &mut Vec<u8>, v: &Value) -> Result<(), CompileError> {
    match v {
        Value::Ipv4(a) => out.extend_from_slice(&a.octets()),
        Value::Ipv6(a) => out.extend_from_slice(&a.octets()),
        Value::Port(p) => out.extend_from_slice(&p.to_be_bytes()),
        Value::Proto(p) | Value::IcmpType(p) | Value::Icmpv6Type(p) | Value::TcpFlags(p) => {
            out.push(*p)
        }
        Value::IfName(name) => {
            if name.contains('\0') {
                return Err(CompileError::NulInName {
                    what: "interface name",
                    name: name.clone(),
                });
            }
            if name.len() >= 16 {
                return Err(CompileError::Invalid(format!(
                    "interface name {name:?} is longer than 15 bytes"
                )));
            }
            let start = out.len();
            out.extend_from_slice(name.as_bytes());
            out.resize(start + 16, 0);
        }
        Value::Mark(m) | Value::CtState(m) | Value::CtStatus(m) | Value::AddrType(m) => {
            out.extend_from_slice(&m.to_ne_bytes())
        }
        Value::Verdict(_) => {
            return Err(CompileError::Invalid(
                "a verdict is not a key or a comparable constant".into(),
            ));
        }
        Value::Field(f, n) => {
            let def = f.def();
            let Some(numeric) = def.numeric else {
                return Err(CompileError::Invalid(format!(
                    "{} has no numeric values",
                    def.text
                )));
            };
            let placed = u128::from(*n) << numeric.shift;
            let len = def.len as usize;
            if len > 16 || placed >> (len * 8) != 0 {
                return Err(CompileError::Invalid(format!(
                    "{n} does not fit {}",
                    def.text
                )));
            }
            out.extend_from_slice(&placed.to_be_bytes()[16 - len..]);
        }
        // `meta hour` and `meta time` load host-order integers that the rule turns to network
        // order (`byteorder hton`, as nft compiles them) so that ranges compare by number.
        Value::Hour(s) => out.extend_from_slice(&s.to_be_bytes()),
        Value::Time(ns) => out.extend_from_slice(&ns.to_be_bytes()),
        Value::Day(d) => out.push(*d),
        Value::Concat(parts) => {
            for p in parts {
                let start = out.len();
                encode_into(out, p)?;
                let len = out.len() - start;
                out.resize(start + len.div_ceil(4) * 4, 0);
            }
        }
    }
    Ok(())
}

/// One element as the kernel sees it: key bytes plus whether it ends an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawKey {
    /// Key bytes; for an element of a concatenated interval set its first key followed by
    /// its last (see [`RawKey::end_at`]).
    pub key: Vec<u8>,
    /// `NFT_SET_ELEM_INTERVAL_END`: the first value after an interval.
    pub interval_end: bool,
    /// Where in `key` the last key (`NFTA_SET_ELEM_KEY_END`, inclusive) of an element of a
    /// concatenated interval set begins; 0 for every other element. One byte in `key`'s
    /// shadow rather than a second buffer: a hundred thousand elements of a batch stay as
    /// small as before (keys are at most 64 bytes).
    pub end_at: u8,
}

impl RawKey {
    /// A key without a last key.
    pub fn plain(key: Vec<u8>, interval_end: bool) -> RawKey {
        RawKey {
            key,
            interval_end,
            end_at: 0,
        }
    }

    /// The element's (first) key.
    pub fn start(&self) -> &[u8] {
        match self.end_at {
            0 => &self.key,
            at => &self.key[..usize::from(at)],
        }
    }

    /// The last key of an element of a concatenated interval set.
    pub fn key_end(&self) -> Option<&[u8]> {
        (self.end_at != 0).then(|| &self.key[usize::from(self.end_at)..])
    }
}

/// The kernel keys of one element: one key for plain sets; for interval sets a start key and,
/// unless the interval reaches the top of the key space, an end key (exclusive). An element
/// of a concatenated interval set is one key with its last key (inclusive) beside it.
pub fn element_keys(key: &ElemKey, interval: bool) -> Result<Vec<RawKey>, CompileError> {
    if interval {
        let concat = match key {
            ElemKey::Value(v @ Value::Concat(_)) => Some((v, v)),
            ElemKey::Range(a @ Value::Concat(_), b @ Value::Concat(_)) => Some((a, b)),
            _ => None,
        };
        if let Some((first, last)) = concat {
            let mut key = encode(first)?;
            let end_at = u8::try_from(key.len())
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| CompileError::Invalid(format!("a key of {} bytes", key.len())))?;
            encode_into(&mut key, last)?;
            return Ok(vec![RawKey {
                key,
                interval_end: false,
                end_at,
            }]);
        }
    }
    let (start, last) = match key {
        ElemKey::Value(v) => {
            let k = encode(v)?;
            if !interval {
                return Ok(vec![RawKey {
                    key: k,
                    interval_end: false,
                    end_at: 0,
                }]);
            }
            (k.clone(), k)
        }
        ElemKey::Prefix(net) => {
            if !interval {
                return Err(CompileError::Invalid(format!(
                    "prefix {net} needs an interval set"
                )));
            }
            (ip_bytes(net.network()), ip_bytes(net.broadcast()))
        }
        ElemKey::Range(a, b) => {
            if !interval {
                return Err(CompileError::Invalid(
                    "a range needs an interval set".into(),
                ));
            }
            (encode(a)?, encode(b)?)
        }
    };
    let mut keys = vec![RawKey {
        key: start,
        interval_end: false,
        end_at: 0,
    }];
    if let Some(end) = increment(&last) {
        keys.push(RawKey {
            key: end,
            interval_end: true,
            end_at: 0,
        });
    }
    Ok(keys)
}

fn ip_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// Big-endian `+1`; `None` on overflow (the interval reaches the top).
fn increment(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = bytes.to_vec();
    for b in out.iter_mut().rev() {
        if *b == 0xff {
            *b = 0;
        } else {
            *b += 1;
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_becomes_start_and_exclusive_end() {
        let keys = element_keys(&ElemKey::Prefix("10.0.0.0/24".parse().unwrap()), true).unwrap();
        assert_eq!(
            keys,
            vec![
                RawKey {
                    key: vec![10, 0, 0, 0],
                    interval_end: false,
                    end_at: 0,
                },
                RawKey {
                    key: vec![10, 0, 1, 0],
                    interval_end: true,
                    end_at: 0,
                }
            ]
        );
        let top =
            element_keys(&ElemKey::Prefix("255.255.255.0/24".parse().unwrap()), true).unwrap();
        assert_eq!(top.len(), 1, "no end element past the top of the space");
    }

    #[test]
    fn a_concatenated_interval_element_is_one_key_with_its_inclusive_last_key() {
        let low = Value::Concat(vec![Value::Ipv4([10, 0, 0, 0].into()), Value::Port(80)]);
        let high = Value::Concat(vec![Value::Ipv4([10, 0, 0, 255].into()), Value::Port(80)]);
        let keys = element_keys(&ElemKey::Range(low.clone(), high), true).unwrap();
        assert_eq!(
            keys,
            vec![RawKey {
                key: vec![10, 0, 0, 0, 0, 80, 0, 0, 10, 0, 0, 255, 0, 80, 0, 0],
                interval_end: false,
                end_at: 8,
            }]
        );
        assert_eq!(keys[0].start(), [10, 0, 0, 0, 0, 80, 0, 0]);
        assert_eq!(keys[0].key_end(), Some(&[10, 0, 0, 255, 0, 80, 0, 0][..]));
        let exact = element_keys(&ElemKey::Value(low), true).unwrap();
        assert_eq!(
            exact[0].key_end(),
            Some(exact[0].start()),
            "a single tuple ends where it starts"
        );
        assert_eq!(exact.len(), 1);
    }

    #[test]
    fn an_interface_name_with_a_nul_is_a_nul_error_not_a_length_error() {
        let err = encode(&Value::IfName("eth\0".into())).unwrap_err();
        assert!(
            matches!(
                err,
                CompileError::NulInName {
                    what: "interface name",
                    ..
                }
            ),
            "{err}"
        );
        assert!(matches!(
            encode(&Value::IfName("x".repeat(16))),
            Err(CompileError::Invalid(_))
        ));
    }

    #[test]
    fn concat_pads_each_part_to_four_bytes() {
        let v = Value::Concat(vec![
            Value::Ipv4("10.0.0.1".parse().unwrap()),
            Value::Proto(6),
            Value::Port(80),
        ]);
        assert_eq!(
            encode(&v).unwrap(),
            vec![10, 0, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0]
        );
    }
}

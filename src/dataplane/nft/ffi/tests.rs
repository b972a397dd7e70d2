//! Unit tests of the safe wrappers (no kernel needed).

use super::attr::{chain, elem, expr as expr_attr, rule, set, table};
use super::*;
use crate::dataplane::nft::CompileError;

#[test]
fn nul_in_name_is_a_validation_error_not_stripped() {
    let mut t = Table::new();
    let err = t.set_str(table::NAME, "edge\0netd").err().unwrap();
    assert_eq!(
        err,
        CompileError::NulInName {
            what: "table name",
            name: "edge\0netd".into()
        }
    );
    assert!(t.view().str(table::NAME).is_none(), "nothing was set");
    let mut c = Chain::new();
    assert!(matches!(
        c.set_str(chain::NAME, "in\0put"),
        Err(CompileError::NulInName {
            what: "chain name",
            ..
        })
    ));
}

#[test]
fn attributes_read_back_as_set() {
    let mut c = Chain::new();
    c.set_str(chain::NAME, "input").unwrap();
    c.set_u32(chain::HOOKNUM, 1).set_i32(chain::PRIO, -150);
    let v = c.view();
    assert_eq!(v.str(chain::NAME).unwrap().to_bytes(), b"input");
    assert_eq!(v.u32(chain::HOOKNUM), Some(1));
    assert_eq!(v.i32(chain::PRIO), Some(-150));
    assert_eq!(v.u32(chain::POLICY), None);
    let mut r = Rule::new();
    r.set_u64(rule::HANDLE, 42)
        .set_blob(rule::USERDATA, &[1, 2, 3]);
    assert_eq!(r.view().u64(rule::HANDLE), Some(42));
    assert_eq!(r.view().blob(rule::USERDATA), Some(&[1u8, 2, 3][..]));
}

#[test]
fn long_names_take_the_allocating_path() {
    let name = "x".repeat(300);
    let mut s = Set::new();
    s.set_str(set::NAME, &name).unwrap();
    assert_eq!(s.view().str(set::NAME).unwrap().to_bytes(), name.as_bytes());
    let bad = format!("{name}\0");
    assert!(s.set_str(set::NAME, &bad).is_err());
}

#[test]
fn data_longer_than_the_kernel_takes_is_refused() {
    let mut e = Elem::new();
    assert!(e.set_data(elem::KEY, &[0; 65]).is_err());
    e.set_data(elem::KEY, &[7; 64]).unwrap();
    assert_eq!(e.view().data(elem::KEY).unwrap().len(), 64);
}

#[test]
fn expressions_and_elements_are_owned_by_their_parent() {
    let mut r = Rule::new();
    let cmp = Expr::<kind::Cmp>::new()
        .with_u32(expr_attr::cmp::SREG, 1)
        .with_u32(expr_attr::cmp::OP, 0)
        .with_data(expr_attr::cmp::DATA, &[6])
        .unwrap();
    r.add_expr(cmp);
    r.add_expr(Expr::<kind::Counter>::new());
    let names: Vec<String> = r
        .view()
        .exprs()
        .map(|e| {
            e.str(super::attr::any_expr::NAME)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(names, ["cmp", "counter"]);
    let mut s = Set::new();
    for k in 0u32..3 {
        let mut e = Elem::new();
        e.set_data(elem::KEY, &k.to_be_bytes()).unwrap();
        s.add_elem(e);
    }
    assert_eq!(s.view().elems().count(), 3);
}

#[test]
fn oversized_payloads_are_refused_before_writing() {
    let mut s = Set::new();
    s.set_str(set::NAME, "big").unwrap();
    for k in 0u32..2000 {
        let mut e = Elem::new();
        e.set_data(elem::KEY, &[0; 64]).unwrap();
        e.set_u32(elem::FLAGS, k);
        s.add_elem(e);
    }
    let payload = Elems(s);
    assert!(!fits(&payload));
    let mut b = BatchBuf::new();
    assert!(b.put(0, 0, 0, 1, &payload).is_err());
    assert_eq!(b.len(), 0, "nothing written");
}

#[test]
fn received_messages_are_bounds_checked() {
    #[repr(C, align(8))]
    struct Buf([u8; 32]);
    let mut buf = Buf([0; 32]);
    buf.0[0..4].copy_from_slice(&24u32.to_ne_bytes());
    buf.0[4..6].copy_from_slice(&2u16.to_ne_bytes());
    buf.0[16..20].copy_from_slice(&(-2i32).to_ne_bytes());
    let m = NlMsg::first(&buf.0).unwrap();
    assert_eq!((m.len(), m.msg_type(), m.error_code()), (24, 2, 2));
    assert!(NlMsg::first(&buf.0[..20]).is_none(), "truncated");
    assert!(NlMsg::first(&buf.0[1..]).is_none(), "misaligned");
    buf.0[0..4].copy_from_slice(&8u32.to_ne_bytes());
    assert!(NlMsg::first(&buf.0).is_none(), "shorter than a header");
}

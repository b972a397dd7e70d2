//! Batch building without a kernel: names with a NUL byte are errors, and a call that fails
//! writes nothing.

use super::*;

fn t() -> TableRef {
    TableRef::new(Family::Inet, "edgenetd-test")
}

fn nul_what(e: &CompileError) -> &'static str {
    match e {
        CompileError::NulInName { what, .. } => what,
        other => panic!("not a NUL error: {other}"),
    }
}

#[test]
fn a_nul_in_a_chain_name_is_an_error_and_writes_nothing() {
    let mut b = Batch::new();
    let err = b
        .add_rule(&t(), &Rule::new("in\0put", vec![Stmt::Counter]))
        .unwrap_err();
    assert_eq!(nul_what(&err), "chain name");
    assert!(b.is_empty());
    assert!(b.error().is_none(), "nothing partial was written");
}

#[test]
fn a_nul_in_a_table_name_makes_the_batch_unsendable() {
    let mut b = Batch::new();
    b.table(&TableRef::new(Family::Inet, "a\0b"), Op::Add);
    assert!(b.is_empty());
    assert_eq!(nul_what(b.error().unwrap()), "table name");
    let mut b = Batch::new();
    b.chain(&t(), &Chain::regular("x\0"), Op::Add);
    assert_eq!(nul_what(b.error().unwrap()), "chain name");
}

#[test]
fn a_nul_in_a_comment_a_log_prefix_or_a_jump_target_is_an_error() {
    let mut b = Batch::new();
    let r = Rule::new("input", vec![Stmt::Counter]).with_comment("ok\0cut");
    assert_eq!(nul_what(&b.add_rule(&t(), &r).unwrap_err()), "rule comment");
    let r = Rule::new(
        "input",
        vec![Stmt::Log {
            prefix: "p\0".into(),
            group: None,
        }],
    );
    assert!(matches!(
        b.add_rule(&t(), &r),
        Err(CompileError::NulInName { .. })
    ));
    let r = Rule::new("input", vec![Stmt::Verdict(Verdict::Jump("svc\0".into()))]);
    assert!(matches!(
        b.add_rule(&t(), &r),
        Err(CompileError::NulInName { .. })
    ));
    let mut vmap = Set::new("vm", KeyType::single(DataType::Ipv4Addr));
    vmap.data = Some(KeyType::single(DataType::Verdict));
    vmap.elements = vec![Element::map(
        ElemKey::Value(Value::Ipv4("192.0.2.1".parse().unwrap())),
        Value::Verdict(Verdict::Goto("c\0".into())),
    )];
    assert_eq!(
        nul_what(&b.add_set(&t(), &vmap).unwrap_err()),
        "verdict chain"
    );
    assert!(b.is_empty());
    assert!(b.error().is_none());
}

#[test]
fn a_bad_element_after_many_good_ones_writes_nothing() {
    let set = Set::new("big", KeyType::single(DataType::Ipv4Addr));
    let mut elements: Vec<Element> = (0..1000u32)
        .map(|i| Element::key(ElemKey::Value(Value::Ipv4(i.into()))))
        .collect();
    elements.push(Element::key(ElemKey::Value(Value::Port(80))));
    let mut b = Batch::new();
    assert!(b.elements(&t(), &set, &elements, Op::Add).is_err());
    assert!(
        b.is_empty(),
        "no chunk of the 1000 good elements was written"
    );
    elements.pop();
    b.elements(&t(), &set, &elements, Op::Add).unwrap();
    assert_eq!(b.len(), 3, "400 + 400 + 200");
}

#[test]
fn replacing_a_table_whose_chain_name_has_a_nul_returns_the_error() {
    let mut table = Table::new(Family::Inet, "edgenetd-test");
    table.chains.push(Chain::regular("bad\0"));
    let mut b = Batch::new();
    let err = b.replace_table(&table).unwrap_err();
    assert_eq!(nul_what(&err), "chain name");
    assert_eq!(
        b.error(),
        Some(&err),
        "the tables already written are never sent alone"
    );
}

fn flowtable(devices: &[&str]) -> Flowtable {
    Flowtable {
        name: "ft".into(),
        priority: 0,
        devices: devices.iter().map(|d| d.to_string()).collect(),
        hw_offload: true,
    }
}

#[test]
fn a_table_with_a_flowtable_adds_it_after_the_sets_and_before_the_rules() {
    let mut table = Table::new(Family::Inet, "edgenetd-test");
    table.chains.push(Chain::base(
        "forward",
        ChainType::Filter,
        Hook::Forward,
        0,
        ChainPolicy::Drop,
    ));
    table
        .sets
        .push(Set::new("s", KeyType::single(DataType::Ipv4Addr)));
    table.flowtables.push(flowtable(&["eth0", "eth1"]));
    table
        .rules
        .push(Rule::new("forward", vec![Stmt::FlowOffload("ft".into())]));
    let mut b = Batch::new();
    b.add_table_contents(&table).unwrap();
    let what: Vec<&str> = b.msgs.iter().map(|m| m.what.as_str()).collect();
    let at = |s: &str| what.iter().position(|w| w.starts_with(s)).unwrap();
    assert!(at("add set s") < at("add flowtable ft"), "{what:?}");
    assert!(at("add flowtable ft") < at("add rule forward"), "{what:?}");
}

#[test]
fn a_nul_in_a_flowtable_device_is_an_error_and_writes_nothing() {
    let mut b = Batch::new();
    let err = b.add_flowtable(&t(), &flowtable(&["eth\0"])).unwrap_err();
    assert_eq!(nul_what(&err), "flowtable device");
    assert!(b.is_empty() && b.error().is_none());
    let err = b
        .add_rule(
            &t(),
            &Rule::new("forward", vec![Stmt::FlowOffload("f\0t".into())]),
        )
        .unwrap_err();
    assert_eq!(nul_what(&err), "flow_offload TABLE_NAME");
}

//! Lowering of the statements sticky services need, read back as libnftnl's debug text of
//! each expression: `ct original` keys carry the direction, and `update @map { k : d }`
//! puts key and data where nft does (the data from the next 16-byte register), or right
//! after the key when that would run past the last register.

use super::*;

/// The debug text of each expression `stmts` lower to.
fn lowered(stmts: Vec<Stmt>) -> Vec<String> {
    let mut raw = ffi::Rule::new();
    let mut anon = Vec::new();
    let mut id = 0;
    compile_rule(
        Family::Inet,
        &Rule::new("c", stmts),
        &mut raw,
        &mut || {
            id += 1;
            id
        },
        &mut anon,
    )
    .unwrap();
    raw.view()
        .exprs()
        .map(|e| {
            let mut buf = [0u8; 256];
            e.debug_text(&mut buf)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

fn recorder(v4: bool) -> Stmt {
    let (saddr, daddr, orig) = if v4 {
        (Field::IpSaddr, Field::IpDaddr, CtOrigKey::IpDaddr)
    } else {
        (Field::Ip6Saddr, Field::Ip6Daddr, CtOrigKey::Ip6Daddr)
    };
    Stmt::MapUpdate {
        map: "sticky".into(),
        key: Expr::Concat(vec![
            Expr::Payload(saddr),
            Expr::CtOriginal(orig),
            Expr::Meta(MetaKey::L4Proto),
            Expr::CtOriginal(CtOrigKey::ProtoDst),
        ]),
        timeout_ms: 3000,
        data: Expr::Concat(vec![Expr::Payload(daddr), Expr::Payload(Field::ThDport)]),
    }
}

fn trimmed(e: Vec<String>) -> Vec<String> {
    e.into_iter().map(|x| x.trim().to_string()).collect()
}

#[test]
fn ipv4_map_update_takes_key_and_data_from_registers_as_nft_does() {
    // As `nft --debug=netlink` shows for the same statement: the key from word 8 (nft's
    // `reg 1`), the data from word 12 (`reg 2`).
    assert_eq!(
        trimmed(lowered(vec![recorder(true)])),
        [
            "load nfproto => reg 1",
            "eq reg 1 0x00000002",
            "load 4b @ network header + 12 => reg 8",
            "load dst_ip => reg 9 , dir original",
            "load l4proto => reg 10",
            "load proto_dst => reg 11 , dir original",
            "load 4b @ network header + 16 => reg 12",
            "load 2b @ transport header + 2 => reg 13",
            "update reg_key 8 set sticky sreg_data 12 timeout 3000ms",
        ]
    );
}

#[test]
fn ipv6_map_update_data_follows_the_key_when_aligned_would_not_fit() {
    // Key: 16 + 16 + 4 + 4 bytes = 10 words (8..17); data 5 words: 18..22, not 20..24.
    assert_eq!(
        trimmed(lowered(vec![recorder(false)])),
        [
            "load nfproto => reg 1",
            "eq reg 1 0x0000000a",
            "load 16b @ network header + 8 => reg 8",
            "load dst_ip6 => reg 12 , dir original",
            "load l4proto => reg 16",
            "load proto_dst => reg 17 , dir original",
            "load 16b @ network header + 24 => reg 18",
            "load 2b @ transport header + 2 => reg 22",
            "update reg_key 8 set sticky sreg_data 18 timeout 3000ms",
        ]
    );
}

#[test]
fn ct_original_keys_read_the_original_direction() {
    let e = trimmed(lowered(vec![Stmt::Cmp {
        left: Expr::CtOriginal(CtOrigKey::ProtoDst),
        op: CmpOp::Eq,
        right: Value::Port(80),
    }]));
    assert_eq!(
        e,
        [
            "load proto_dst => reg 8 , dir original",
            "eq reg 8 0x00005000"
        ]
    );
    assert_eq!(
        Expr::Concat(vec![
            Expr::CtOriginal(CtOrigKey::Ip6Daddr),
            Expr::Meta(MetaKey::L4Proto),
            Expr::CtOriginal(CtOrigKey::ProtoDst),
        ])
        .byte_len(),
        24
    );
}

#[test]
fn map_update_and_dynamic_maps_render_as_nft_writes_them() {
    let rule = Rule::new(
        "c",
        vec![
            Stmt::Cmp {
                left: Expr::Meta(MetaKey::L4Proto),
                op: CmpOp::Eq,
                right: Value::Proto(6),
            },
            recorder(true),
        ],
    );
    assert_eq!(
        crate::dataplane::nft::text::render_rule(Family::Inet, &rule),
        "meta l4proto tcp update @sticky { ip saddr . ct original ip daddr . meta l4proto . \
         ct original proto-dst timeout 3s : ip daddr . th dport }"
    );
    let mut t = Table::new(Family::Inet, "t");
    let mut m = Set::new(
        "sticky",
        KeyType(vec![DataType::Ipv4Addr, DataType::InetService]),
    );
    m.data = Some(KeyType::single(DataType::Ipv4Addr));
    m.dynamic = Some(100);
    t.sets.push(m);
    let text = crate::dataplane::nft::text::render_table(&t);
    assert!(
        text.contains("size 100\n\t\tflags dynamic,timeout\n"),
        "{text}"
    );
}

/// The fence's key: the source masked with its marker bit set, then the address, in the
/// registers after it.
fn masked_key(mask: Vec<u8>, xor: Vec<u8>) -> Stmt {
    Stmt::Lookup {
        left: Expr::Concat(vec![
            Expr::Bitwise {
                input: Box::new(Expr::Payload(Field::IpSaddr)),
                mask,
                xor,
            },
            Expr::Payload(Field::IpDaddr),
        ]),
        set: SetRef::Named("ranges4".into()),
        negate: false,
    }
}

#[test]
fn a_bitwise_key_part_masks_and_flips_its_own_register_only() {
    let e = lowered(vec![masked_key(vec![255, 255, 255, 0], vec![0, 0, 0, 128])]);
    // The nfproto dependency, the source into reg 8, the bitwise on reg 8 alone, the
    // address into reg 9, the lookup of both.
    assert_eq!(
        e,
        [
            "load nfproto => reg 1 ",
            "eq reg 1 0x00000002 ",
            "load 4b @ network header + 12 => reg 8 ",
            "reg 8 = ( reg 8 & 0x00ffffff ) ^ 0x80000000 ",
            "load 4b @ network header + 16 => reg 9 ",
            "reg 8 set ranges4 ",
        ]
    );
    let Stmt::Lookup { left, .. } = masked_key(vec![255, 255, 255, 0], vec![0, 0, 0, 128]) else {
        unreachable!()
    };
    let mut text = String::new();
    crate::dataplane::nft::text::render_expr(&mut text, &left);
    assert_eq!(text, "(ip saddr & 255.255.255.0 | 0.0.0.128) . ip daddr");
}

#[test]
fn a_bitwise_of_the_wrong_length_is_refused() {
    let mut raw = ffi::Rule::new();
    let err = compile_rule(
        Family::Inet,
        &Rule::new("c", vec![masked_key(vec![255; 16], vec![0; 4])]),
        &mut raw,
        &mut || 1,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("16 and 4 bytes on a 4-byte value"),
        "{err}"
    );
}

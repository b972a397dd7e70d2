//! The TLS a probe needs, without a TLS library: a ClientHello (offering TLS 1.3 and 1.2)
//! and the check that the answer is a ServerHello record. It proves a TLS server is answering
//! on the port; it does not verify the certificate nor finish the handshake.

use super::random;

/// Whether the first bytes of the server's answer are a ServerHello record.
pub fn server_hello(head: &[u8]) -> Result<(), String> {
    match head {
        [0x16, 0x03, _, _, _, 0x02, ..] => Ok(()),
        [0x15, 0x03, _, _, _, _, desc] => Err(format!("TLS alert {desc}")),
        [] => Err("closed without an answer".into()),
        _ => Err("not a TLS ServerHello".into()),
    }
}

/// A ClientHello offering TLS 1.3 (an X25519 key share of random bytes: the handshake is
/// never finished) and TLS 1.2, with the suites and extensions common servers expect.
pub fn client_hello(sni: Option<&str>) -> Vec<u8> {
    let mut exts = Vec::new();
    if let Some(name) = sni {
        let n = name.as_bytes();
        let mut list = vec![0u8];
        push_u16_bytes(&mut list, n);
        let mut data = Vec::new();
        push_u16_bytes(&mut data, &list);
        ext(&mut exts, 0x0000, &data);
    }
    ext(
        &mut exts,
        0x000a,
        &[0, 6, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x18],
    );
    ext(&mut exts, 0x000b, &[1, 0]);
    let sigs: [u16; 9] = [
        0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601, 0x0807,
    ];
    let mut sig = vec![0u8, (sigs.len() * 2) as u8];
    sigs.iter()
        .for_each(|s| sig.extend_from_slice(&s.to_be_bytes()));
    ext(&mut exts, 0x000d, &sig);
    ext(&mut exts, 0x0017, &[]);
    ext(&mut exts, 0xff01, &[0]);
    ext(&mut exts, 0x002b, &[4, 0x03, 0x04, 0x03, 0x03]);
    let mut share = vec![0x00, 0x1d, 0, 32];
    share.extend_from_slice(&random_bytes::<32>());
    let mut shares = Vec::new();
    push_u16_bytes(&mut shares, &share);
    ext(&mut exts, 0x0033, &shares);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&random_bytes::<32>());
    body.push(32);
    body.extend_from_slice(&random_bytes::<32>());
    let suites: [u16; 11] = [
        0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0x009c, 0x002f,
    ];
    let mut s = Vec::new();
    suites
        .iter()
        .for_each(|c| s.extend_from_slice(&c.to_be_bytes()));
    push_u16_bytes(&mut body, &s);
    body.extend_from_slice(&[1, 0]);
    push_u16_bytes(&mut body, &exts);
    let mut hs = vec![0x01];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01];
    push_u16_bytes(&mut record, &hs);
    record
}

fn ext(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    out.extend_from_slice(&kind.to_be_bytes());
    push_u16_bytes(out, data);
}

/// `data` preceded by its length as two bytes.
fn push_u16_bytes(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(&(data.len() as u16).to_be_bytes());
    out.extend_from_slice(data);
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    for chunk in b.chunks_mut(8) {
        let r = random().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_hello_lengths_are_consistent() {
        let h = client_hello(Some("www.example.com"));
        assert_eq!(&h[..3], &[0x16, 0x03, 0x01]);
        assert_eq!(u16::from_be_bytes([h[3], h[4]]) as usize, h.len() - 5);
        assert_eq!(h[5], 0x01);
        let hs_len = u32::from_be_bytes([0, h[6], h[7], h[8]]) as usize;
        assert_eq!(hs_len, h.len() - 9);
        assert!(h.windows(15).any(|w| w == b"www.example.com"));
        assert!(server_hello(&[0x16, 0x03, 0x03, 0, 90, 0x02, 0]).is_ok());
        assert_eq!(
            server_hello(&[0x15, 0x03, 0x03, 0, 2, 2, 70]),
            Err("TLS alert 70".into())
        );
    }
}

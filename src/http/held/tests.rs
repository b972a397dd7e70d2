use std::io::{ErrorKind, Read};
use std::net::{Ipv4Addr, TcpListener};

use super::*;

/// A connected pair over loopback: (the client's end, the server's end).
fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

/// Whether the server closed the client's connection (EOF or reset), waiting up to 1 s for
/// the FIN to arrive.
fn closed(client: &mut TcpStream) -> bool {
    client
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut byte = [0u8; 1];
    loop {
        match client.read(&mut byte) {
            Ok(0) => return true,
            Ok(_) => panic!("the server wrote to a held socket"),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if Instant::now() > deadline {
                    return false;
                }
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn an_evicted_connection_stays_open_until_its_head_deadline() {
    let mut held = Held::new(8);
    let (mut client, server) = pair();
    let opened = Instant::now();
    held.hold(server, opened);
    assert_eq!(held.len(), 1);
    assert!(
        held.woken.try_recv().is_ok(),
        "the first socket wakes the reaper"
    );
    assert_eq!(held.reap(opened), Some(opened + HEAD_DEADLINE));
    assert!(!closed(&mut client), "closed before its head deadline");
    assert_eq!(held.reap(opened + HEAD_DEADLINE), None);
    assert_eq!(held.len(), 0);
    assert!(closed(&mut client), "still open after its head deadline");
}

#[test]
fn a_full_queue_makes_the_accept_loop_wait_then_closes_its_oldest() {
    let mut held = Held::new(2);
    let t0 = Instant::now();
    let (mut first, server) = pair();
    held.hold(server, t0);
    assert_eq!(held.accept_after(), None, "room left");
    let (mut second, server) = pair();
    held.hold(server, t0 + Duration::from_millis(10));
    assert_eq!(
        held.accept_after(),
        Some(t0 + MIN_LIFE),
        "full: no accept before the oldest has lived MIN_LIFE"
    );
    let (_third, server) = pair();
    held.hold(server, t0 + Duration::from_millis(20));
    assert_eq!(held.len(), 2);
    assert!(closed(&mut first), "the oldest makes room");
    assert!(!closed(&mut second));
}

#[test]
fn the_cap_follows_the_descriptor_limit() {
    let cap = cap();
    assert!(cap <= MAX_HELD);
    let soft = soft_nofile().expect("/proc/self/limits has a number");
    assert_eq!(cap as u64, (soft / 8).min(MAX_HELD as u64));
}

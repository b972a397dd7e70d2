use std::net::{Ipv4Addr, TcpStream};
use std::sync::mpsc;
use std::time::Instant;

use super::*;
use crate::clock::FakeClock;
use crate::liveness::Liveness;

/// An endless, always-ready supply of connections: each `next` connects a client to a
/// loopback listener and hands over the accepted end (the client end is closed at once).
struct Flood {
    /// The listener the clients connect to.
    listener: TcpListener,
    /// Connections handed out so far.
    accepted: Cell<u64>,
}

impl Accept for Flood {
    fn next(&self) -> impl Future<Output = io::Result<(Async<TcpStream>, SocketAddr)>> {
        let result = TcpStream::connect(self.listener.local_addr().unwrap())
            .and_then(|_client| self.listener.accept())
            .and_then(|(stream, peer)| Ok((Async::new(stream)?, peer)));
        self.accepted.set(self.accepted.get() + 1);
        std::future::ready(result)
    }
}

#[test]
fn accept_loop_yields_under_a_flood_so_deadlines_keep_firing() {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let flood = Flood {
            listener: TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap(),
            accepted: Cell::new(0),
        };
        let state = Arc::new(HttpState {
            liveness: Liveness::new(FakeClock::new()),
            exporter: None,
            allow: None,
            sections: Default::default(),
            health_ports: Default::default(),
        });
        let ex = Rc::new(smol::LocalExecutor::new());
        let t = Instant::now();
        let deadline = async {
            smol::Timer::after(Duration::from_millis(50)).await;
        };
        let serve = async {
            let table = Rc::new(RefCell::new(Admission::new(LIMITS)));
            accept_loop(Rc::clone(&ex), &flood, state, table).await;
        };
        smol::block_on(ex.run(future::or(serve, deadline)));
        let _ = done.send((t.elapsed(), flood.accepted.get()));
    });
    let (took, accepted) = finished
        .recv_timeout(Duration::from_secs(10))
        .expect("a 50 ms timer never fired while connections kept arriving");
    assert!(
        took < Duration::from_secs(2),
        "the timer fired after {took:?}"
    );
    assert!(accepted >= 1, "the flood ran ({accepted} accepts)");
}

impl<T: Accept> Accept for &T {
    fn next(&self) -> impl Future<Output = io::Result<(Async<TcpStream>, SocketAddr)>> {
        (*self).next()
    }
}

#[test]
fn sources_are_classed_before_a_slot_is_taken() {
    let allow: Vec<IpNet> = vec!["10.9.9.0/24".parse().unwrap()];
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(classify(ip("10.9.9.7"), Some(&allow)), Class::Trusted);
    assert_eq!(classify(ip("10.9.8.7"), Some(&allow)), Class::Forbidden);
    assert_eq!(
        classify(ip("127.0.0.1"), Some(&allow)),
        Class::Forbidden,
        "metrics_allow, once set, is the whole list"
    );
    assert_eq!(classify(ip("127.0.0.1"), None), Class::Trusted);
    assert_eq!(classify(ip("::1"), None), Class::Trusted);
    assert_eq!(classify(ip("192.168.1.9"), None), Class::Other);
}

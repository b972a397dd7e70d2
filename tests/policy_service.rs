//! The policy and the service tables together (DESIGN.md §3): a service VIP is reachable
//! through a router whose policy drops forwarded traffic by default, because traffic edgenetd
//! DNATed passes the policy's forward chain — unless a policy rule says otherwise.

mod common;
mod policy_common;

use edgenetd::config::load_str;
use edgenetd::controller::policy::PolicyController;
use edgenetd::controller::service::ServiceController;
use edgenetd::controller::{Controller, NoProgress, trigger};
use policy_common::{HOME, Topology};

const SERVICE: &str = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
protocol = "tcp"
backends = ["10.0.0.10:80"]
"#;

netns_test! {
    fn a_service_vip_passes_the_policy_forward_chain_unless_a_rule_drops_it() {
        let t = Topology::new();
        // The wan host reaches the VIP through the router.
        t.wan.sh("ip route add 10.96.0.0/16 via 192.0.2.1");
        t.serve(Some(&t.lan), "tcp", 80);
        let (pt, _prx) = trigger();
        let (st, _srx) = trigger();
        // One watch for both, as the daemon does: neither mistakes the other's commit for drift.
        let watch = edgenetd::dataplane::nft::GenerationWatch::new();
        let mut policy = PolicyController::new(pt, watch.clone());
        let mut service = ServiceController::new(st, watch);
        let sync_both = |policy: &mut PolicyController, service: &mut ServiceController, cfg: &str| {
            let desired = load_str(&[("edgenetd.toml", cfg)]).unwrap_or_else(|e| panic!("{e}"));
            smol::block_on(service.sync(&desired, &NoProgress)).unwrap();
            smol::block_on(policy.sync(&desired, &NoProgress)).unwrap();
        };
        sync_both(&mut policy, &mut service, &format!("{HOME}{SERVICE}"));
        // Forward default is drop and no rule allows wan -> lan, yet the VIP works.
        assert_eq!(t.connect(Some(&t.wan), "tcp", "10.96.0.10", 80), "192.0.2.2");
        // The backend itself is not reachable directly from the wan.
        assert!(t.connect(Some(&t.wan), "tcp", "10.0.0.10", 80).starts_with("FAIL"));
        // A policy rule that says otherwise (wan -> lan dropped) wins over the DNAT pass.
        let drop_rule = "\n[[policy.rule]]\nname = \"no-wan-to-lan\"\nfrom = \"wan\"\nto = \"lan\"\naction = \"drop\"\n";
        sync_both(&mut policy, &mut service, &format!("{HOME}{drop_rule}{SERVICE}"));
        assert!(t.connect(Some(&t.wan), "tcp", "10.96.0.10", 80).starts_with("FAIL"));
    }
}

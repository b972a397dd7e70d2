//! The policy and the service tables together: a service VIP is reachable
//! through a router whose policy drops forwarded traffic by default, because traffic edgenetd
//! DNATed passes the policy's forward chain — unless a policy rule says otherwise.

use crate::common;
use crate::netns_test;

use common::controller::{Driver, load};
use common::policy::{HOME, WEB_SERVICE, lan_wan};
use common::topology::failed;
use edgenetd::controller::policy::PolicyController;
use edgenetd::controller::service::ServiceController;

netns_test! {
    fn a_service_vip_passes_the_policy_forward_chain_unless_a_rule_drops_it() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        // The wan host reaches the VIP through the router.
        wan.sh("ip route add 10.96.0.0/16 via 192.0.2.1");
        t.serve(lan, "tcp", 80);
        // One watch for both, as the daemon does: neither mistakes the other's commit for drift.
        let watch = edgenetd::dataplane::nft::GenerationWatch::new();
        let mut policy = Driver::policy_sharing(&watch);
        let mut service = Driver::service_sharing(&watch);
        let sync_both = |policy: &mut Driver<PolicyController>, service: &mut Driver<ServiceController>, cfg: &str| {
            let desired = load(cfg);
            service.sync_state(&desired).unwrap();
            policy.sync_state(&desired).unwrap();
        };
        sync_both(&mut policy, &mut service, &format!("{HOME}{WEB_SERVICE}"));
        // Forward default is drop and no rule allows wan -> lan, yet the VIP works.
        assert_eq!(t.connect(wan, "tcp", "10.96.0.10", 80), "192.0.2.2");
        // The backend itself is not reachable directly from the wan.
        assert!(failed(&t.connect(wan, "tcp", "10.0.0.10", 80)));
        // A policy rule that says otherwise (wan -> lan dropped) wins over the DNAT pass.
        let drop_rule = "\n[[policy.rule]]\nname = \"no-wan-to-lan\"\nfrom = \"wan\"\nto = \"lan\"\naction = \"drop\"\n";
        sync_both(&mut policy, &mut service, &format!("{HOME}{drop_rule}{WEB_SERVICE}"));
        assert!(failed(&t.connect(wan, "tcp", "10.96.0.10", 80)));
    }
}

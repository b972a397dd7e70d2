//! The conntrack mark bits edgenetd's own tables give a meaning to. Both nftables
//! controllers set [`OWN_DNAT_MARK`] (port forwards, service VIPs) and the policy's forward
//! chain admits by it, so it is defined here, above both, and not in the dataplane's IR
//! (which carries whatever mark it is given). [`SERVICE_MASQ_MARK`] is the service table's
//! alone; it sits beside the other so that the two bits are seen to differ (`ct mark |` keeps
//! the other bits, so one connection can carry both).

/// The conntrack mark bit edgenetd sets on the connections it DNATs (port forwards, service
/// VIPs), so its forward chain can admit exactly those and not DNAT done by other tables.
pub const OWN_DNAT_MARK: u32 = 0x8000_0000;
/// The conntrack mark bit the service table sets, before DNAT, on the connections whose path
/// (the address they were sent to, the client, the hook) asks for masquerade; postrouting
/// masquerades the DNATed connections that carry it.
pub const SERVICE_MASQ_MARK: u32 = 0x4000_0000;

//! A Sentinel, for what lockgate asks of one: `SENTINEL MASTER <group>` (the master's address
//! and the configuration epoch) and the `+switch-master` announcements on pub/sub. Which
//! replica to promote and when is the simulation's to decide (the nemesis): it tells each
//! Sentinel of a failover with [`crate::Server::announce_master`], each at its own instant, as
//! Sentinels hear of one.

use crate::resp::Frame;

#[derive(Debug, Clone)]
pub struct Sentinel {
    pub group: String,
    /// The master's `host:port`.
    pub master: String,
    pub epoch: u64,
}

impl Sentinel {
    /// `SENTINEL <args>`: `None` for what the simulation does not have.
    pub fn answer(&self, args: &[Vec<u8>]) -> Option<Frame> {
        let sub = args.first()?.to_ascii_uppercase();
        match (sub.as_slice(), args.get(1)) {
            (b"MASTER", Some(group)) if args.len() == 2 => {
                Some(if group == self.group.as_bytes() {
                    let (host, port) = self
                        .master
                        .rsplit_once(':')
                        .unwrap_or((&self.master, "6379"));
                    let fields = [
                        ("name", self.group.as_str()),
                        ("ip", host),
                        ("port", port),
                        ("flags", "master"),
                        ("config-epoch", &self.epoch.to_string()),
                    ];
                    Frame::Array(
                        fields
                            .iter()
                            .flat_map(|(k, v)| [Frame::bulk(k), Frame::bulk(v)])
                            .collect(),
                    )
                } else {
                    Frame::error("ERR No such master with that name")
                })
            }
            _ => None,
        }
    }

    /// The `+switch-master` message for a move to `to`: `<group> <old host> <old port> <new
    /// host> <new port>`.
    pub fn switch_message(&self, to: &str) -> String {
        let split = |address: &str| {
            let (host, port) = address.rsplit_once(':').unwrap_or((address, "6379"));
            format!("{host} {port}")
        };
        format!("{} {} {}", self.group, split(&self.master), split(to))
    }
}

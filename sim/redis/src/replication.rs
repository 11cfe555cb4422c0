//! Asynchronous replication to one replica, as Redis does it, for what lockgate can observe:
//! every write command moves the master's offset; the replica receives the master's keyspace
//! as it was after that write, a lag later; `WAIT` counts the replica once it holds the
//! offset of the connection's last command. A promoted replica has every write it received
//! and none of the others: what a failover loses.
//!
//! The replica receives whole keyspaces, not the commands' effects: the keyspaces lockgate's
//! worlds make are a few dozen keys, and a copy cannot drift from the master the way a
//! command run again later could (an expiry met at another instant).

use std::collections::VecDeque;

use crate::keyspace::Db;
use crate::server::Server;

/// The link from a master to its replica.
#[derive(Debug)]
pub struct Feed {
    pub replica: Server,
    /// How long a write takes to reach the replica (milliseconds of the master's clock).
    lag_ms: i64,
    /// Writes sent and not received yet, oldest first: the offset, when it arrives, the
    /// keyspace after it.
    in_flight: VecDeque<(u64, i64, Db)>,
    /// The offset the replica holds.
    pub acked: u64,
}

impl Feed {
    /// A link to `replica`, which holds `offset` already (a full synchronisation).
    pub fn new(replica: Server, lag_ms: i64, offset: u64) -> Self {
        Self {
            replica,
            lag_ms,
            in_flight: VecDeque::new(),
            acked: offset,
        }
    }

    /// The write that moved the offset to `offset`, at `now_ms`, leaving `db`.
    pub fn send(&mut self, offset: u64, now_ms: i64, db: &Db) {
        self.in_flight
            .push_back((offset, now_ms + self.lag_ms, db.clone()));
    }

    /// Gives the replica what has arrived by `now_ms`.
    pub fn deliver(&mut self, now_ms: i64) {
        let mut newest = None;
        while self
            .in_flight
            .front()
            .is_some_and(|(_, due, _)| *due <= now_ms)
        {
            newest = self.in_flight.pop_front();
        }
        if let Some((offset, _, db)) = newest {
            self.replica.receive(db);
            self.acked = offset;
        }
    }

    /// When the replica will hold `offset`, if it is on its way (and not already there).
    pub fn arrival_of(&self, offset: u64) -> Option<i64> {
        self.in_flight
            .iter()
            .find(|(sent, _, _)| *sent >= offset)
            .map(|(_, due, _)| *due)
    }
}

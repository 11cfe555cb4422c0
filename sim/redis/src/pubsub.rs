//! Channels and patterns, and who listens: `PUBLISH` writes the message into each listener's
//! outgoing queue while the command runs, so a listener sees it before the reply to anything
//! it sends later (what Redis's output buffers guarantee).

use std::collections::{BTreeMap, BTreeSet};

use tokio::sync::mpsc::UnboundedSender;

use crate::glob::matches;
use crate::resp::Frame;

/// A connection, by the order it was accepted.
pub type ConnId = u64;

#[derive(Debug, Default)]
pub struct PubSub {
    /// Each channel's listeners, in the order they subscribed.
    channels: BTreeMap<Vec<u8>, Vec<ConnId>>,
    /// Each pattern's listeners, in the order they subscribed.
    patterns: BTreeMap<Vec<u8>, Vec<ConnId>>,
    /// Each connection's outgoing queue.
    outboxes: BTreeMap<ConnId, UnboundedSender<Frame>>,
}

impl PubSub {
    pub fn open(&mut self, conn: ConnId, outbox: UnboundedSender<Frame>) {
        self.outboxes.insert(conn, outbox);
    }

    /// Forgets a connection that closed, with its subscriptions.
    pub fn close(&mut self, conn: ConnId) {
        self.outboxes.remove(&conn);
        for listeners in self.channels.values_mut().chain(self.patterns.values_mut()) {
            listeners.retain(|c| *c != conn);
        }
        self.channels.retain(|_, l| !l.is_empty());
        self.patterns.retain(|_, l| !l.is_empty());
    }

    /// Sends `frame` to `conn` (its reply or a message); a closed connection drops it.
    pub fn send(&self, conn: ConnId, frame: Frame) {
        if let Some(outbox) = self.outboxes.get(&conn) {
            let _ = outbox.send(frame);
        }
    }

    /// The connections subscribed to `channel` (not by a pattern).
    pub fn listeners(&self, channel: &[u8]) -> usize {
        self.channels.get(channel).map_or(0, Vec::len)
    }

    /// `PUBLISH`: the number of listeners reached.
    pub fn publish(&self, channel: &[u8], message: &[u8]) -> i64 {
        let mut reached = 0;
        for conn in self.channels.get(channel).into_iter().flatten() {
            self.send(
                *conn,
                Frame::Array(vec![
                    Frame::bulk("message"),
                    Frame::bulk(channel),
                    Frame::bulk(message),
                ]),
            );
            reached += 1;
        }
        for (pattern, listeners) in &self.patterns {
            if matches(pattern, channel) {
                for conn in listeners {
                    self.send(
                        *conn,
                        Frame::Array(vec![
                            Frame::bulk("pmessage"),
                            Frame::bulk(pattern),
                            Frame::bulk(channel),
                            Frame::bulk(message),
                        ]),
                    );
                    reached += 1;
                }
            }
        }
        reached
    }

    /// How many channels and patterns `conn` listens to.
    pub fn count(&self, conn: ConnId) -> usize {
        self.channels_of(conn).len() + self.patterns_of(conn).len()
    }

    pub fn channels_of(&self, conn: ConnId) -> Vec<Vec<u8>> {
        of(&self.channels, conn)
    }

    pub fn patterns_of(&self, conn: ConnId) -> Vec<Vec<u8>> {
        of(&self.patterns, conn)
    }

    /// Subscribes `conn` to a channel (`pattern` false) or a pattern; false if it already was.
    pub fn subscribe(&mut self, conn: ConnId, name: &[u8], pattern: bool) -> bool {
        let map = if pattern {
            &mut self.patterns
        } else {
            &mut self.channels
        };
        let listeners = map.entry(name.to_vec()).or_default();
        if listeners.contains(&conn) {
            return false;
        }
        listeners.push(conn);
        true
    }

    pub fn unsubscribe(&mut self, conn: ConnId, name: &[u8], pattern: bool) -> bool {
        let map = if pattern {
            &mut self.patterns
        } else {
            &mut self.channels
        };
        let Some(listeners) = map.get_mut(name) else {
            return false;
        };
        let before = listeners.len();
        listeners.retain(|c| *c != conn);
        let removed = listeners.len() != before;
        if listeners.is_empty() {
            map.remove(name);
        }
        removed
    }
}

fn of(map: &BTreeMap<Vec<u8>, Vec<ConnId>>, conn: ConnId) -> Vec<Vec<u8>> {
    let set: BTreeSet<&Vec<u8>> = map
        .iter()
        .filter(|(_, l)| l.contains(&conn))
        .map(|(name, _)| name)
        .collect();
    set.into_iter().cloned().collect()
}

//! Lockgate's Redis keys, written straight into a command's buffer (no `String` per key per
//! request). The layout is described in the module above.

use super::cluster::with_slot_tag;

/// What the channel of a name's grant announcements adds to its lock key.
pub(super) const ACQUIRED: &str = ":acquired";

/// Where fence counters are: one per server, or one per hash slot (Cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Counters {
    One,
    PerSlot,
}

/// The keys of one lock name, written straight into a command's buffer (no `String` per key
/// per request).
#[derive(Clone, Copy)]
pub(super) struct LockKeys<'a> {
    pub(super) prefix: &'a str,
    pub(super) name: &'a str,
    pub(super) counters: Counters,
}

/// What goes between the prefix and the suffix of a key.
#[derive(Clone, Copy)]
enum Tag<'a> {
    /// Nothing: `<prefix><suffix>`.
    None,
    /// `{<name>}`: the name's own keys.
    Name(&'a str),
    /// `{<tag>}` with a tag of the name's hash slot: the slot's fence counter.
    SlotOf(&'a str),
}

/// One key: `<prefix><tag><suffix>`.
#[derive(Clone, Copy)]
pub(super) struct Key<'a> {
    prefix: &'a str,
    tag: Tag<'a>,
    suffix: &'static str,
}

/// The keys of a name kept in the name's own hash slot, `<prefix>{<name>}<suffix>`: one
/// method per row, named as the row.
macro_rules! name_keys {
    ($($(#[$doc:meta])* $key:ident => $suffix:expr,)*) => {
        impl<'a> LockKeys<'a> {
            $($(#[$doc])*
            pub(super) fn $key(&self) -> Key<'a> {
                self.key(Tag::Name(self.name), $suffix)
            })*
        }
    };
}

name_keys! {
    lock => "",
    /// The per-name fence counter a lockgate before the fence-in-token format kept.
    legacy_counter => ":fence",
    claim => ":claim",
    /// Who holds the current grant, when it names a holder (see `backend::holder`).
    holder => ":holder",
    /// A reentrant grant's hold count, while it is held more than once.
    holds => ":holds",
    /// The lock's fair queue (see `backend::queue`, `fair_head.lua`).
    queue => ":queue",
    /// The fair queue's liveness hash: each gateway's deadline, and the arrival counter.
    queue_live => ":queue:live",
    /// The token of the grant last revoked, until its lease would have ended.
    revoked => ":revoked",
    /// While a lock waits: no new grant of the set kept beside it (a read/write lock's
    /// readers; see `hold_off.rs`).
    hold_off => ":writer-waiting",
    /// The pub/sub channel on which releases of the name are announced. Not a key, but
    /// tagged like one so that a sharded channel would live in the name's slot.
    channel => ":released",
    /// The channel on which grants of the name are announced (by the acquire script, which
    /// derives it from the lock key: keep the two in step).
    acquired_channel => ACQUIRED,
}

impl<'a> LockKeys<'a> {
    /// The name's key `<prefix>{<name>}<suffix>` a kind of lease names itself (see
    /// [`GrantSetKind`](crate::backend::GrantSetKind)). A channel's suffix must not end in
    /// `:released`, which the notifier reads as a lock's release channel.
    pub(super) fn named(&self, suffix: &'static str) -> Key<'a> {
        self.key(Tag::Name(self.name), suffix)
    }

    fn key(&self, tag: Tag<'a>, suffix: &'static str) -> Key<'a> {
        Key {
            prefix: self.prefix,
            tag,
            suffix,
        }
    }

    /// The fence counter shared by this name and the others of its slot.
    pub(super) fn counter(&self) -> Key<'a> {
        match self.counters {
            Counters::One => self.key(Tag::None, "fences"),
            Counters::PerSlot => self.key(Tag::SlotOf(self.name), ":fences"),
        }
    }

    /// The channel on which `gateway` is told that its fair waiter heads the queue (published
    /// by the scripts, which derive it from the lock key: keep the two in step).
    pub(super) fn head_channel_string(&self, gateway: &str) -> String {
        format!("{}:head:{gateway}", self.lock())
    }
}

impl Key<'_> {
    /// Hands each part of the key to `put`, in order.
    fn write(&self, mut put: impl FnMut(&str)) {
        put(self.prefix);
        match self.tag {
            Tag::None => {}
            Tag::Name(name) => {
                put("{");
                put(name);
                put("}");
            }
            Tag::SlotOf(name) => with_slot_tag(name, |tag| {
                put("{");
                put(tag);
                put("}");
            }),
        }
        put(self.suffix);
    }
}

/// The key as text, for subscriptions (a channel's name) and for logs.
impl std::fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut outcome = Ok(());
        self.write(|part| outcome = outcome.and_then(|()| f.write_str(part)));
        outcome
    }
}

impl redis::ToRedisArgs for Key<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        let mut arg = out.writer_for_next_arg();
        // Writing to the command's in-memory buffer cannot fail.
        self.write(|part| {
            let _ = std::io::Write::write_all(&mut arg, part.as_bytes());
        });
    }
}

#[cfg(test)]
mod tests {
    use redis::ToRedisArgs;

    use super::*;
    use crate::backend::redis::cluster;

    fn arg(key: Key<'_>) -> String {
        String::from_utf8(key.to_redis_args().concat()).expect("utf-8")
    }

    #[test]
    fn a_lock_and_its_slot_counter_share_a_hash_slot() {
        let keys = LockKeys {
            prefix: "lockgate:",
            name: "orders:42",
            counters: Counters::One,
        };
        assert_eq!(arg(keys.lock()), "lockgate:{orders:42}");
        assert_eq!(arg(keys.counter()), "lockgate:fences");
        assert_eq!(arg(keys.legacy_counter()), "lockgate:{orders:42}:fence");
        assert_eq!(arg(keys.claim()), "lockgate:{orders:42}:claim");
        assert_eq!(arg(keys.holder()), "lockgate:{orders:42}:holder");
        assert_eq!(arg(keys.revoked()), "lockgate:{orders:42}:revoked");
        assert_eq!(arg(keys.channel()), "lockgate:{orders:42}:released");
        assert_eq!(keys.lock().to_string(), "lockgate:{orders:42}");
        assert_eq!(arg(keys.named(":any")), "lockgate:{orders:42}:any");
        assert_eq!(
            arg(keys.acquired_channel()),
            "lockgate:{orders:42}:acquired"
        );
        assert_eq!(
            keys.head_channel_string("g1"),
            "lockgate:{orders:42}:head:g1"
        );

        let clustered = LockKeys {
            counters: Counters::PerSlot,
            ..keys
        };
        let counter = arg(clustered.counter());
        let tag = counter
            .strip_prefix("lockgate:{")
            .and_then(|rest| rest.strip_suffix("}:fences"))
            .expect("a tagged counter");
        assert_eq!(cluster::slot(tag), cluster::slot("orders:42"));
    }
}

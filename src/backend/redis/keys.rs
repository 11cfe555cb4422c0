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
pub(super) struct Key<'a> {
    prefix: &'a str,
    tag: Tag<'a>,
    suffix: &'static str,
}

impl<'a> LockKeys<'a> {
    fn key(&self, tag: Tag<'a>, suffix: &'static str) -> Key<'a> {
        Key {
            prefix: self.prefix,
            tag,
            suffix,
        }
    }

    pub(super) fn lock(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), "")
    }

    /// The fence counter shared by this name and the others of its slot.
    pub(super) fn counter(&self) -> Key<'a> {
        match self.counters {
            Counters::One => self.key(Tag::None, "fences"),
            Counters::PerSlot => self.key(Tag::SlotOf(self.name), ":fences"),
        }
    }

    /// The per-name fence counter a lockgate before the fence-in-token format kept.
    pub(super) fn legacy_counter(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":fence")
    }

    pub(super) fn claim(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":claim")
    }

    /// Who holds the current grant, when it names a holder (see `backend::holder`).
    pub(super) fn holder(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":holder")
    }

    /// A reentrant grant's hold count, while it is held more than once.
    pub(super) fn holds(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":holds")
    }

    /// The lock's fair queue (see `backend::queue`, `fair.lua`).
    pub(super) fn queue(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":queue")
    }

    /// The fair queue's liveness hash: each gateway's deadline, and the arrival counter.
    pub(super) fn queue_live(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":queue:live")
    }

    /// The channel on which `gateway` is told that its fair waiter heads the queue (published
    /// by the scripts, which derive it from the lock key: keep the two in step).
    pub(super) fn head_channel_string(&self, gateway: &str) -> String {
        format!("{}{{{}}}:head:{gateway}", self.prefix, self.name)
    }

    /// The token of the grant last revoked, until its lease would have ended.
    pub(super) fn revoked(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":revoked")
    }

    /// A read/write lock's readers: tokens scored by expiry (see `shared_acquire.lua`).
    pub(super) fn readers(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":readers")
    }

    /// A read/write lock's readers' claims and holders (see `shared_acquire.lua`).
    pub(super) fn readers_info(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":readers:info")
    }

    /// While a writer waits: no new reader (see `shared_acquire.lua`).
    pub(super) fn hold_off(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":writer-waiting")
    }

    /// A semaphore's permits: tokens scored by expiry (see `permit_acquire.lua`).
    pub(super) fn permits(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":permits")
    }

    /// A semaphore's limit, claims and holders (see `permit_acquire.lua`).
    pub(super) fn semaphore(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":semaphore")
    }

    /// The channel on which a semaphore's permits given back are announced. Not ending in
    /// `:released`, which the notifier reads as a lock's release channel.
    pub(super) fn permits_channel(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":permits:freed")
    }

    /// [`LockKeys::permits_channel`] as a string (for the subscriptions of waiters).
    pub(super) fn permits_channel_string(&self) -> String {
        format!("{}{{{}}}:permits:freed", self.prefix, self.name)
    }

    /// The pub/sub channel on which releases of the name are announced. Not a key, but
    /// tagged like one so that a sharded channel would live in the name's slot.
    pub(super) fn channel(&self) -> Key<'a> {
        self.key(Tag::Name(self.name), ":released")
    }

    /// The channel on which grants of the name are announced (by the acquire script, which
    /// derives it from the lock key: keep the two in step).
    pub(super) fn acquired_channel(&self) -> String {
        format!("{}{{{}}}{ACQUIRED}", self.prefix, self.name)
    }

    /// The lock key as a string (for the subscriptions of waiters).
    pub(super) fn lock_string(&self) -> String {
        format!("{}{{{}}}", self.prefix, self.name)
    }
}

impl redis::ToRedisArgs for Key<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        let mut arg = out.writer_for_next_arg();
        // Writing to the command's in-memory buffer cannot fail.
        let mut put = |part: &str| {
            let _ = std::io::Write::write_all(&mut arg, part.as_bytes());
        };
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
        assert_eq!(keys.lock_string(), "lockgate:{orders:42}");
        assert_eq!(arg(keys.permits()), "lockgate:{orders:42}:permits");
        assert_eq!(arg(keys.semaphore()), "lockgate:{orders:42}:semaphore");
        assert_eq!(arg(keys.permits_channel()), keys.permits_channel_string());
        assert_eq!(keys.acquired_channel(), "lockgate:{orders:42}:acquired");

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

#!lua flags=allow-oom
-- First, before any prelude, in a script that must run on a full server (maxmemory reached
-- under noeviction) and adds nothing to it: a renewal, which moves the end of a lease already
-- granted. Redis refuses a ZADD on a full server even when it only changes a member's score,
-- so without this flag a semaphore's permit or a reader could not be renewed while an
-- exclusive lock (PEXPIRE) could: their holders would lose them because the server is full.
-- Redis reads this flag and strips its line before Lua reads the script. A script that may
-- add a key or a member must not start with it: refusing those is what keeps a full server
-- from growing.

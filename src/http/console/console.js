// lockgate's operator console. Served from the gateway itself (GET /ui), no dependencies.
//
// What it shows comes from the API, asked with the key entered on the page:
// - GET /locks/events?prefix= (NDJSON, read with fetch so that the key goes in a header, never
//   in a URL): the held locks first (`state`), then every transition, live;
// - GET /locks?name=… every second for the locks on screen: waiters, fair queue, mode, holders;
// - GET /semaphores?prefix= every 2 s: the permits in use;
// - GET /contention?prefix= every 2 s: the names this gateway's requests wait for most;
// - GET /access once: whether the key may revoke, and where.
// Every value from a lock (name, owner, metadata) is put in the page with textContent: text,
// never markup. The key is kept in sessionStorage (this tab only) and sent only to this origin.
'use strict';

(() => {
  const KEY_STORAGE = 'lockgate-console-key';
  const REFRESH_MS = 1000;
  const SEMAPHORES_MS = 2000;
  const LOG_MAX = 200;
  const NAMES_PER_LOOK = 64;
  const FRESH_MS = 1500;

  const $ = (id) => document.getElementById(id);
  const state = {
    prefix: '',
    key: sessionStorage.getItem(KEY_STORAGE) || '',
    generation: 0,
    controller: null,
    access: null,
    locks: new Map(),
    ended: new Set(),
    semaphores: [],
    contention: [],
    log: [],
    selected: null,
    pendingRevoke: null,
  };

  function authHeaders(extra) {
    const headers = Object.assign({}, extra || {});
    if (state.key) headers.Authorization = 'Bearer ' + state.key;
    return headers;
  }

  function setStatus(text, level) {
    const status = $('status');
    status.textContent = text;
    status.dataset.level = level;
  }

  async function problemText(response) {
    try {
      const problem = await response.json();
      return (problem.title || response.status) + (problem.detail ? ': ' + problem.detail : '');
    } catch (_) {
      return 'HTTP ' + response.status;
    }
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // ---- Watching -------------------------------------------------------------------------

  function start(prefixChanged) {
    state.generation += 1;
    if (prefixChanged) state.log = [];
    if (state.controller) state.controller.abort();
    state.controller = new AbortController();
    state.locks.clear();
    state.ended.clear();
    state.semaphores = [];
    state.contention = [];
    state.selected = null;
    render();
    const generation = state.generation;
    const signal = state.controller.signal;
    loadAccess(generation, signal).then((ok) => {
      if (!ok) return;
      follow(generation, signal);
      refreshLoop(generation, signal);
      semaphoreLoop(generation, signal);
      contentionLoop(generation, signal);
    });
  }

  // Asked without a key, /access says whether one is needed; with one, what it may do.
  async function loadAccess(generation, signal) {
    try {
      const response = await fetch('/access', { headers: authHeaders(), signal, cache: 'no-store' });
      if (generation !== state.generation) return false;
      if (!response.ok) {
        setStatus(await problemText(response), 'error');
        return false;
      }
      state.access = await response.json();
      if (state.access.api_keys && !state.access.key) {
        setStatus('This gateway needs an API key: enter one above (it is kept for this tab only).', 'warn');
        return false;
      }
      return true;
    } catch (error) {
      if (error.name !== 'AbortError') setStatus('Cannot reach the gateway: ' + error.message, 'error');
      return false;
    }
  }

  // The prefix stream, reconnected with backoff when it breaks.
  async function follow(generation, signal) {
    let backoff = 500;
    while (generation === state.generation) {
      try {
        const url = '/locks/events?prefix=' + encodeURIComponent(state.prefix);
        const response = await fetch(url, {
          headers: authHeaders({ Accept: 'application/x-ndjson' }),
          signal,
          cache: 'no-store',
        });
        if (!response.ok) {
          const text = await problemText(response);
          setStatus(text, 'error');
          if (response.status === 401 || response.status === 403 || response.status === 400) return;
        } else {
          setStatus(watchingText(), 'ok');
          backoff = 500;
          // A new stream starts with the held locks as they are: what was on screen may be stale.
          state.locks.clear();
          await readLines(response.body, signal, (event) => onEvent(event));
          if (generation === state.generation) setStatus('The stream ended; reconnecting…', 'warn');
        }
      } catch (error) {
        if (error.name === 'AbortError' || generation !== state.generation) return;
        setStatus('Disconnected (' + error.message + '); reconnecting…', 'error');
      }
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  function watchingText() {
    const where = state.prefix ? 'under “' + state.prefix + '”' : 'on every lock';
    const who = state.access && state.access.key ? ' as ' + state.access.key : '';
    return 'Live ' + where + who + '.';
  }

  async function readLines(body, signal, each) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done || signal.aborted) return;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (line.trim()) each(JSON.parse(line));
      }
    }
  }

  function onEvent(event) {
    const now = Date.now();
    switch (event.event) {
      case 'keep-alive':
        return;
      case 'overflow':
        setStatus('Too many locks to follow under this prefix (the gateway’s --max-watchers); narrow the prefix.', 'warn');
        addLog(event, now);
        break;
      case 'state':
        // As the lock was when the stream (re)started: not a change to point out.
        if (event.held) upsert(event, 0);
        else state.locks.delete(event.name);
        break;
      case 'acquired':
        upsert(event, now);
        addLog(event, now);
        break;
      case 'released':
      case 'expired':
      case 'revoked': {
        if (event.fence !== undefined) state.ended.add(event.fence);
        const row = state.locks.get(event.name);
        if (row && (event.fence === undefined || row.fence === event.fence || row.fence === undefined)) {
          state.locks.delete(event.name);
        }
        const told = Object.assign({}, event);
        if (row && row.owner !== undefined) told.owner = row.owner;
        addLog(told, now);
        break;
      }
      default:
        return;
    }
    render();
  }

  // `seenAt` is when it changed (0: unknown), for the highlight of a fresh grant.
  function upsert(event, seenAt) {
    const now = Date.now();
    const row = state.locks.get(event.name) || { name: event.name, waiting: 0, mode: 'exclusive', firstSeen: seenAt };
    if (row.fence !== event.fence) row.firstSeen = seenAt;
    row.fence = event.fence;
    row.owner = event.owner;
    row.metadata = event.metadata;
    row.acquiredAt = event.acquired_at ? Date.parse(event.acquired_at) : undefined;
    row.expiresAt = event.ttl_ms !== undefined ? now + event.ttl_ms : undefined;
    row.toldAt = now;
    state.locks.set(event.name, row);
  }

  function addLog(event, now) {
    state.log.unshift({ at: now, name: event.name, event: event.event, fence: event.fence, owner: event.owner });
    if (state.log.length > LOG_MAX) state.log.length = LOG_MAX;
  }

  // What the stream does not carry: waiters, queues, modes, readers. Looked up by name (one
  // inspect each: no walk of the store).
  async function refreshLoop(generation, signal) {
    while (generation === state.generation) {
      await sleep(REFRESH_MS);
      const names = Array.from(state.locks.keys());
      for (let i = 0; i < names.length && generation === state.generation; i += NAMES_PER_LOOK) {
        const batch = names.slice(i, i + NAMES_PER_LOOK);
        const startedAt = Date.now();
        try {
          const query = batch.map((name) => 'name=' + encodeURIComponent(name)).join('&');
          const response = await fetch('/locks?' + query, { headers: authHeaders(), signal, cache: 'no-store' });
          if (!response.ok) continue;
          const page = await response.json();
          merge(batch, page.locks || [], startedAt);
        } catch (error) {
          if (error.name === 'AbortError') return;
        }
      }
      render();
    }
  }

  function merge(asked, locks, startedAt) {
    const now = Date.now();
    const found = new Map(locks.map((lock) => [lock.name, lock]));
    for (const name of asked) {
      const row = state.locks.get(name);
      if (!row) continue;
      const lock = found.get(name);
      if (!lock) {
        // Not held when looked at, and the stream told nothing newer: gone.
        if (row.toldAt < startedAt) state.locks.delete(name);
        continue;
      }
      if (lock.fence !== undefined && state.ended.has(lock.fence)) continue;
      if (lock.fence !== row.fence && row.toldAt >= startedAt) continue;
      row.fence = lock.fence;
      row.owner = lock.owner;
      row.metadata = lock.metadata;
      row.mode = lock.mode || 'exclusive';
      row.waiting = lock.waiting || 0;
      row.waiters = lock.waiters || [];
      row.queued = lock.queued;
      row.queue = lock.queue || [];
      row.holdCount = lock.hold_count;
      row.sharedHolders = lock.shared_holders || [];
      if (lock.acquired_at) row.acquiredAt = Date.parse(lock.acquired_at);
      row.expiresAt = lock.ttl_ms !== undefined ? now + lock.ttl_ms : undefined;
    }
  }

  // Asks `url()` every SEMAPHORES_MS while this watch lasts, and gives each answer to `apply`.
  async function pollLoop(generation, signal, url, apply) {
    while (generation === state.generation) {
      try {
        const response = await fetch(url(), { headers: authHeaders(), signal, cache: 'no-store' });
        if (response.ok) {
          apply(await response.json());
          render();
        }
      } catch (error) {
        if (error.name === 'AbortError') return;
      }
      await sleep(SEMAPHORES_MS);
    }
  }

  function semaphoreLoop(generation, signal) {
    const url = () => '/semaphores?prefix=' + encodeURIComponent(state.prefix) + '&limit=1000';
    return pollLoop(generation, signal, url, (page) => {
      const now = Date.now();
      state.semaphores = (page.semaphores || []).map((semaphore) => Object.assign({ seenAt: now }, semaphore));
    });
  }

  // The names waited for most in this gateway (its own requests only), from memory: no Redis.
  function contentionLoop(generation, signal) {
    const url = () => '/contention?prefix=' + encodeURIComponent(state.prefix) + '&limit=20';
    return pollLoop(generation, signal, url, (answer) => {
      state.contention = answer.names || [];
    });
  }

  // ---- Revoking -------------------------------------------------------------------------

  function mayRevoke(name) {
    const access = state.access;
    if (!access || !access.operations.includes('revoke')) return false;
    return access.prefixes.some((prefix) => name.startsWith(prefix));
  }

  // What a revoke of a lock's row or a semaphore's row ends, and how it is asked for.
  const REVOKES = {
    lock: {
      path: '/locks/',
      what: 'the lock',
      detail: (row) => 'fence ' + (row.fence === undefined ? 'none' : fenceText(row.fence)),
      hint: 'Its holder loses the lock at once (every reader, if readers hold it): its next renew or release answers 410, and a waiter may take it.',
    },
    semaphore: {
      path: '/semaphores/',
      what: 'every permit of',
      detail: (row) => (row.holders || []).length + ' held',
      hint: 'Every holder loses its permit at once: its next renew or release answers 410, and waiters may take them.',
    },
  };

  function askRevoke(kind, row) {
    const revoke = REVOKES[kind];
    state.pendingRevoke = { kind, name: row.name };
    $('confirm-what').textContent = revoke.what;
    $('confirm-name').textContent = row.name;
    $('confirm-detail').textContent = revoke.detail(row);
    $('confirm-hint').textContent = revoke.hint;
    $('confirm').showModal();
  }

  async function revoke() {
    const pending = state.pendingRevoke;
    state.pendingRevoke = null;
    $('confirm').close();
    if (!pending) return;
    const path = REVOKES[pending.kind].path;
    try {
      const response = await fetch(path + encodeURIComponent(pending.name) + '?force=true', {
        method: 'DELETE',
        headers: authHeaders(),
      });
      if (response.status === 204) setStatus('Revoked ' + pending.name + '.', 'ok');
      else setStatus('Revoke ' + pending.name + ': ' + (await problemText(response)), 'error');
    } catch (error) {
      setStatus('Revoke ' + pending.name + ': ' + error.message, 'error');
    }
  }

  // A cell with a revoke button for `row` (of `kind`), empty where the key may not revoke.
  function revokeCell(tr, kind, row) {
    const actions = document.createElement('td');
    if (mayRevoke(row.name)) {
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'danger revoke';
      button.textContent = 'Revoke';
      button.addEventListener('click', (event) => {
        event.stopPropagation();
        askRevoke(kind, row);
      });
      actions.appendChild(button);
    }
    tr.appendChild(actions);
  }

  // ---- Rendering (text only) ------------------------------------------------------------

  function cell(row, text, className, label) {
    const td = document.createElement('td');
    td.textContent = text;
    if (className) td.className = className;
    if (label) td.dataset.label = label;
    row.appendChild(td);
    return td;
  }

  function duration(ms) {
    if (ms === undefined || Number.isNaN(ms)) return '—';
    if (ms < 0) ms = 0;
    if (ms < 10000) return (ms / 1000).toFixed(1) + ' s';
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + String(s % 60).padStart(2, '0') + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  }

  // A fence in groups of three digits (it is a time in microseconds, 16 digits today); the
  // cell's title keeps it whole, to copy.
  function fenceText(fence) {
    if (fence === undefined) return '—';
    return String(fence).replace(/\B(?=(\d{3})+(?!\d))/g, '\u202f');
  }

  // A moment with its date: 2026-12-05 09:41:07 in the browser's time zone.
  function dateTime(ms) {
    const d = new Date(ms);
    const two = (n) => String(n).padStart(2, '0');
    return d.getFullYear() + '-' + two(d.getMonth() + 1) + '-' + two(d.getDate()) + ' ' +
      two(d.getHours()) + ':' + two(d.getMinutes()) + ':' + two(d.getSeconds());
  }

  // A figure in milliseconds: below a second as such, above as a duration.
  function millis(ms) {
    return ms < 1000 ? ms + ' ms' : duration(ms);
  }

  // Two percentiles in milliseconds.
  function percentiles(p50, p99) {
    if (p50 === undefined) return '—';
    return millis(p50) + ' / ' + millis(p99);
  }

  // This gateway's waiters of a lock, the longest waiting first: whom each waits for (its
  // owner, where it sent one) and for how long so far.
  function waitersText(waiters) {
    if (!waiters || !waiters.length) return '—';
    return waiters
      .map((waiter) => (waiter.owner || '(no owner)') + (waiter.fair ? ' (fair)' : '') + ' ' + duration(waiter.waited_ms))
      .join(', ');
  }

  // The head of a fair lock's queue, every gateway's waiters in turn: each one's owner, its
  // priority when it has one, `here` for this gateway's, and how long it has had its place.
  function queueText(queue) {
    if (!queue || !queue.length) return '—';
    return queue
      .map((place, i) => {
        const notes = [];
        if (place.priority > 0) notes.push('priority ' + place.priority);
        if (place.here) notes.push('here');
        return (i + 1) + '. ' + (place.owner || '(no owner)') +
          (notes.length ? ' (' + notes.join(', ') + ')' : '') +
          (place.waited_ms === undefined ? '' : ' ' + duration(place.waited_ms));
      })
      .join(', ');
  }

  function ownerText(row) {
    if (row.mode === 'shared' && row.sharedHolders && row.sharedHolders.length) {
      return row.sharedHolders.map((holder) => holder.owner || '(no owner)').join(', ');
    }
    return row.owner === undefined ? '—' : row.owner;
  }

  // Rows of the table `id`, one per entry (named by its `name`) filled in by `fill`, its
  // count in `<id>-count` and its "none" line `no-<id>` shown when there is none.
  function fillTable(id, entries, fill) {
    const body = $(id).tBodies[0];
    body.replaceChildren();
    for (const entry of entries) {
      const tr = document.createElement('tr');
      tr.dataset.name = entry.name;
      fill(tr, entry);
      body.appendChild(tr);
    }
    $(id + '-count').textContent = entries.length ? '(' + entries.length + ')' : '';
    $('no-' + id).hidden = entries.length > 0;
  }

  function render() {
    const now = Date.now();
    const rows = Array.from(state.locks.values()).sort((a, b) => (a.name < b.name ? -1 : 1));
    const body = $('locks').tBodies[0];
    body.replaceChildren();
    for (const lock of rows) {
      const tr = document.createElement('tr');
      tr.dataset.name = lock.name;
      if (now - lock.firstSeen < FRESH_MS) tr.classList.add('fresh');
      if (state.selected === lock.name) tr.classList.add('selected');
      cell(tr, lock.name, 'name', 'Name');
      const mode = lock.mode === 'shared' ? 'read (' + (lock.sharedHolders || []).length + ')' : 'exclusive';
      cell(tr, lock.holdCount > 1 ? mode + ' ×' + lock.holdCount : mode, '', 'Mode');
      cell(tr, ownerText(lock), 'owner', 'Owner');
      cell(tr, lock.metadata === undefined ? '—' : JSON.stringify(lock.metadata), 'meta', 'Metadata');
      const fence = cell(tr, fenceText(lock.fence), 'num fence', 'Fence');
      if (lock.fence !== undefined) fence.title = String(lock.fence);
      const held = cell(tr, lock.acquiredAt === undefined ? '—' : duration(now - lock.acquiredAt), 'num held', 'Held for');
      if (lock.acquiredAt !== undefined) held.title = 'since ' + dateTime(lock.acquiredAt);
      cell(tr, lock.expiresAt === undefined ? 'no expiry' : duration(lock.expiresAt - now), 'num left', 'Lease left');
      const waiting = (lock.waiting || 0) + (lock.queued ? ' (' + lock.queued + ' queued, fair)' : '');
      const waitCell = cell(tr, String(waiting), 'num waiting-count', 'Waiting');
      if (lock.waiting > 0 || lock.queued > 0) waitCell.classList.add('waiting');
      cell(tr, waitersText(lock.waiters), 'owner waiters', 'Waiters here');
      cell(tr, queueText(lock.queue), 'owner queue', 'Fair queue');
      revokeCell(tr, 'lock', lock);
      tr.addEventListener('click', () => {
        state.selected = state.selected === lock.name ? null : lock.name;
        render();
      });
      body.appendChild(tr);
    }
    $('lock-count').textContent = rows.length ? '(' + rows.length + ')' : '';
    $('no-locks').hidden = rows.length > 0;

    fillTable('contention', state.contention, (tr, hot) => {
      cell(tr, hot.name, 'name', 'Name');
      cell(tr, hot.kind, '', 'Kind');
      const waiting = cell(tr, String(hot.waiting), 'num waiting-count', 'Waiting now');
      if (hot.waiting > 0) waiting.classList.add('waiting');
      cell(tr, hot.waits + ' (' + hot.timeouts + ')', 'num waits', 'Waits (ran out)');
      cell(tr, percentiles(hot.wait_p50_ms, hot.wait_p99_ms), 'num wait-times', 'Wait p50 / p99');
      cell(tr, percentiles(hot.hold_p50_ms, hot.hold_p99_ms), 'num hold-times', 'Hold p50 / p99');
      cell(tr, millis(hot.waited_ms), 'num', 'Waited in all');
    });

    fillTable('semaphores', state.semaphores, (tr, semaphore) => {
      cell(tr, semaphore.name, 'name', 'Name');
      const holders = semaphore.holders || [];
      cell(tr, holders.length + ' of ' + semaphore.permits, 'num permits', 'Permits in use');
      cell(tr, holders.map((holder) => holder.owner || '(no owner)').join(', ') || '—', 'owner', 'Holders');
      const longest = holders.reduce((most, holder) => Math.max(most, holder.ttl_ms || 0), 0);
      cell(tr, duration(longest - (now - semaphore.seenAt)), 'num', 'Longest lease left');
      revokeCell(tr, 'semaphore', semaphore);
    });

    const log = $('log');
    log.replaceChildren();
    const shown = state.selected ? state.log.filter((entry) => entry.name === state.selected) : state.log;
    $('log-filter').textContent = state.selected ? 'of ' + state.selected + ' (click the row again for all)' : '';
    $('no-log').hidden = shown.length > 0;
    for (const entry of shown.slice(0, 50)) {
      const li = document.createElement('li');
      const time = document.createElement('time');
      time.textContent = dateTime(entry.at);
      time.dateTime = new Date(entry.at).toISOString();
      const kind = document.createElement('span');
      kind.className = 'event ' + entry.event;
      kind.textContent = entry.event;
      const text = document.createElement('span');
      let what = entry.name;
      if (entry.fence !== undefined) what += ' fence ' + fenceText(entry.fence);
      if (entry.owner !== undefined) what += ' by ' + entry.owner;
      text.textContent = what;
      li.append(time, kind, text);
      log.appendChild(li);
    }
  }

  // Counting down: the durations move every 200 ms without a request.
  function tick() {
    const now = Date.now();
    for (const tr of $('locks').tBodies[0].rows) {
      const lock = state.locks.get(tr.dataset.name);
      if (!lock) continue;
      tr.querySelector('.held').textContent = lock.acquiredAt === undefined ? '—' : duration(now - lock.acquiredAt);
      tr.querySelector('.left').textContent = lock.expiresAt === undefined ? 'no expiry' : duration(lock.expiresAt - now);
      tr.classList.toggle('fresh', now - lock.firstSeen < FRESH_MS);
    }
  }

  // ---- Page -----------------------------------------------------------------------------

  function prefixFromFragment() {
    const params = new URLSearchParams(location.hash.slice(1));
    return params.get('prefix') || '';
  }

  document.addEventListener('DOMContentLoaded', () => {
    state.prefix = prefixFromFragment();
    $('prefix').value = state.prefix;
    $('key').value = state.key;
    $('watch').addEventListener('submit', (event) => {
      event.preventDefault();
      const prefix = $('prefix').value.trim();
      const prefixChanged = prefix !== state.prefix;
      state.prefix = prefix;
      state.key = $('key').value;
      if (state.key) sessionStorage.setItem(KEY_STORAGE, state.key);
      else sessionStorage.removeItem(KEY_STORAGE);
      // The prefix may go in the address (to share a view); the key never does.
      history.replaceState(null, '', state.prefix ? '#prefix=' + encodeURIComponent(state.prefix) : '#');
      start(prefixChanged);
    });
    $('forget').addEventListener('click', () => {
      sessionStorage.removeItem(KEY_STORAGE);
      state.key = '';
      $('key').value = '';
      start();
    });
    $('confirm-yes').addEventListener('click', revoke);
    $('confirm-no').addEventListener('click', () => {
      state.pendingRevoke = null;
      $('confirm').close();
    });
    setInterval(tick, 200);
    // Enabled only now: before its handler is bound, a click or an Enter would submit the
    // form natively (the key in a URL), which the page's CSP blocks, leaving the page stuck.
    $('connect').disabled = false;
    start();
  });
})();

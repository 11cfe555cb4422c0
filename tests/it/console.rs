//! The operator's console (`/ui`) in a real browser (headless Chromium over WebDriver), against
//! a gateway on Redis with API keys: a lock taken by a client shows within 1 s with its owner
//! and fence, and goes within 1 s of its release; a waiter shows as waiting; a semaphore shows
//! its permits in use; a key without `revoke` gets no revoke button, one with it does, and
//! revoking a lock or a semaphore's permits from the page makes the holder's next renew 410;
//! the names contended here are shown with their waits, and a fair lock's queue with the
//! owners of waiters in any gateway; fences and times are readable. Values from locks are text: an
//! owner and metadata made of markup render as themselves, run nothing, open no dialog and log
//! no error. `LOCKGATE_CONSOLE_SCREENSHOT=path` saves the screenshot the README shows.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::browser::Browser;
use crate::support::gateway::{Gateway, redis_config};
use crate::support::redis::RedisServer;
use lockgate::http::dto::RenewBody;

use crate::support::answers::{Answered, json_of};
use crate::support::token;

const KEYS: &str = r#"[
    {"name": "viewer", "key": "viewer-key-0123456789", "prefixes": ["app:"], "operations": ["inspect"]},
    {"name": "operator", "key": "operator-key-0123456789", "prefixes": ["app:"], "operations": ["inspect", "revoke"]},
    {"name": "worker", "key": "worker-key-0123456789", "prefixes": ["app:"]}
]"#;
const WORKER: &str = "worker-key-0123456789";

/// How long the page may take to show a lock taken or released (the issue's bar).
const SHOWN_WITHIN: Duration = Duration::from_secs(1);

async fn acquire(gw: &Gateway, name: &str, body: Value) -> Value {
    let grant = gw.client_as(WORKER).acquire(name, &body, None, None).await;
    let (status, grant) = json_of(grant);
    assert_eq!(status, 201, "{grant}");
    grant
}

async fn release(gw: &Gateway, name: &str, grant: &Value) {
    let worker = gw.client_as(WORKER);
    worker.release(name, &token(grant), None).await.done(204);
}

/// `GET path` of the console's files. Raw HTTP: the files and their security headers are
/// what is tested (a browser, not the API's client, reads them).
async fn console_file(gw: &Gateway, path: &str) -> reqwest::Response {
    gw.http.get(gw.url(path)).send().await.expect("console")
}

/// Runs `script` every 25 ms until it returns something other than `null`; that, and how
/// long it took. Fails after 10 s, saying what the page and the gateway had done by then.
async fn wait_for(
    gw: &Gateway,
    browser: &Browser,
    what: &str,
    script: &str,
    args: Value,
) -> (Value, Duration) {
    let started = Instant::now();
    loop {
        let value = browser.run(script, args.clone()).await;
        if !value.is_null() {
            return (value, started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(10) {
            panic!(
                "the page never showed {what}\n{}",
                what_happened(gw, browser).await
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// For a failure's message: the page's status, address and state, the requests it has seen
/// answered (with when they started and how long they took, in ms since the page began), its
/// console, and the requests the gateway counted by operation.
async fn what_happened(gw: &Gateway, browser: &Browser) -> String {
    let page = browser
        .run(
            "return {
                 status: document.getElementById('status').textContent,
                 address: location.href,
                 ready: document.readyState,
                 answered: performance.getEntriesByType('resource').map((e) =>
                     e.name.replace(location.origin, '') + ' at ' + Math.round(e.startTime)
                         + ' took ' + Math.round(e.duration)),
                 now: Math.round(performance.now()),
             };",
            json!([]),
        )
        .await;
    let console = browser.console().await;
    let metrics = gw.metrics_text().await;
    let counted: Vec<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("lockgate_requests_total"))
        .collect();
    format!("page: {page:#}\nbrowser console: {console:?}\ngateway counted: {counted:#?}")
}

/// A lock's row as the page shows it, or `null`.
const ROW: &str = r#"
    const row = Array.from(document.querySelectorAll('#locks tbody tr'))
        .find((tr) => tr.dataset.name === arguments[0]);
    if (!row) return null;
    return {
        owner: row.querySelector('.owner').textContent,
        meta: row.querySelector('.meta').textContent,
        fence: row.querySelector('.fence').textContent,
        fence_whole: row.querySelector('.fence').title,
        held_since: row.querySelector('.held').title,
        waiting: row.querySelector('.waiting-count').textContent,
        waiters: row.querySelector('.waiters').textContent,
        queue: row.querySelector('.queue').textContent,
        revoke: row.querySelector('button.revoke') !== null,
    };
"#;

/// Clicks the revoke button on the row of `name` in the table `table` (`locks`,
/// `semaphores`), and returns what the confirmation then says: whether it is open, what it
/// revokes and the name.
async fn ask_revoke(browser: &Browser, table: &str, name: &str) -> Value {
    browser
        .run(
            "Array.from(document.querySelectorAll('#' + arguments[0] + ' tbody tr'))
                 .find((tr) => tr.dataset.name === arguments[1])
                 .querySelector('button.revoke').click();",
            json!([table, name]),
        )
        .await;
    browser
        .run(
            "return {open: document.getElementById('confirm').open,
                     what: document.getElementById('confirm-what').textContent,
                     name: document.getElementById('confirm-name').textContent};",
            json!([]),
        )
        .await
}

/// Whether `text` is a local date and time as the page writes them: `2026-12-05 09:41:07`.
fn is_date_time(text: &str) -> bool {
    let shape = text
        .chars()
        .map(|c| if c.is_ascii_digit() { '0' } else { c })
        .collect::<String>();
    shape == "0000-00-00 00:00:00"
}

/// `true` once the lock's row is gone, else `null`.
const NO_ROW: &str = r#"
    const found = Array.from(document.querySelectorAll('#locks tbody tr'))
        .some((tr) => tr.dataset.name === arguments[0]);
    return found ? null : true;
"#;

/// Watches `prefix` with the key `name` (`secret`), and waits until the page says it is live
/// with that key: the status of a previous watch does not count.
async fn watch(gw: &Gateway, browser: &Browser, prefix: &str, (name, secret): (&str, &str)) {
    let enabled = browser
        .run(
            "return !document.getElementById('connect').disabled;",
            json!([]),
        )
        .await;
    assert_eq!(
        enabled, true,
        "the page's script has not enabled its Watch button"
    );
    browser
        .run(
            "document.getElementById('prefix').value = arguments[0];
             document.getElementById('key').value = arguments[1];
             document.getElementById('watch').requestSubmit();",
            json!([prefix, secret]),
        )
        .await;
    let live = format!("Live under “{prefix}” as {name}.");
    wait_for(
        gw,
        browser,
        &format!("“{live}”"),
        "const s = document.getElementById('status');
         return s.dataset.level === 'ok' && s.textContent === arguments[0] ? true : null;",
        json!([live]),
    )
    .await;
}

#[tokio::test]
async fn the_console_shows_locks_live_and_revokes_with_the_scope() {
    let redis = RedisServer::start();
    let mut cfg = redis_config(&redis.url());
    cfg.api_keys = Some(lockgate::access::ApiKeys::from_json(KEYS).expect("keys"));
    let gw = Gateway::start(cfg).await;
    let browser = Browser::start(1280, 860).await;
    browser.open(&gw.url("/ui")).await;
    watch(&gw, &browser, "app:", ("viewer", "viewer-key-0123456789")).await;

    // Taken with a client: on the page within 1 s, owner and fence; gone within 1 s of release.
    let sent = Instant::now();
    let one = acquire(&gw, "app:one", json!({"owner": "alice", "ttl_ms": 30_000})).await;
    let (row, _) = wait_for(&gw, &browser, "app:one", ROW, json!(["app:one"])).await;
    let shown = sent.elapsed();
    assert!(shown <= SHOWN_WITHIN, "app:one shown after {shown:?}");
    assert_eq!(row["owner"], "alice");
    // The fence in groups of three digits, whole in the cell's title; the time held with its
    // date.
    let fence = one["fence"].as_u64().expect("fence").to_string();
    assert_eq!(row["fence_whole"], fence);
    let shown_fence = row["fence"].as_str().expect("fence text");
    assert_eq!(shown_fence.replace('\u{202f}', ""), fence);
    assert_eq!(
        shown_fence.matches('\u{202f}').count(),
        (fence.len() - 1) / 3
    );
    let since = row["held_since"].as_str().expect("held since");
    assert!(is_date_time(since.trim_start_matches("since ")), "{since}");
    let released = Instant::now();
    release(&gw, "app:one", &one).await;
    wait_for(&gw, &browser, "app:one gone", NO_ROW, json!(["app:one"])).await;
    let gone = released.elapsed();
    assert!(
        gone <= SHOWN_WITHIN,
        "app:one still shown {gone:?} after release"
    );

    // A lock with a waiter, one more held, and a semaphore with two of three permits.
    let busy = acquire(&gw, "app:busy", json!({"owner": "bob", "ttl_ms": 30_000})).await;
    let waiter = {
        let worker = gw.client_as(WORKER);
        tokio::spawn(async move {
            let body = json!({"owner": "carol", "wait_ms": 20_000});
            json_of(worker.acquire("app:busy", &body, None, None).await)
        })
    };
    let (row, _) = wait_for(
        &gw,
        &browser,
        "a waiter on app:busy",
        &format!("const r = (() => {{ {ROW} }})(); return r && r.waiting === '1' ? r : null;"),
        json!(["app:busy"]),
    )
    .await;
    assert_eq!(row["owner"], "bob");
    // Who waits: carol, for a moment so far.
    let waiters = row["waiters"].as_str().expect("waiters");
    assert!(waiters.starts_with("carol "), "{waiters}");
    // A wait that runs out: app:busy is now this gateway's most contended name, with the
    // waiter above waiting for it now.
    let timed_out = gw.client_as(WORKER);
    let body = json!({"wait_ms": 200});
    let refused = timed_out.acquire("app:busy", &body, None, None).await;
    assert_eq!(json_of(refused).0, 409);
    let (hot, _) = wait_for(
        &gw,
        &browser,
        "app:busy contended",
        "const row = Array.from(document.querySelectorAll('#contention tbody tr'))
             .find((tr) => tr.dataset.name === arguments[0]);
         return row ? {waits: row.querySelector('.waits').textContent,
                       waiting: row.querySelector('.waiting-count').textContent,
                       times: row.querySelector('.wait-times').textContent} : null;",
        json!(["app:busy"]),
    )
    .await;
    assert_eq!(hot["waits"], "1 (1)", "{hot}");
    assert_eq!(hot["waiting"], "1", "{hot}");
    // 200 ms lies in the bucket bounded by 2^(16/2) = 256 ms.
    assert_eq!(hot["times"], "256 ms / 256 ms", "{hot}");
    let held = acquire(
        &gw,
        "app:held",
        json!({"owner": "worker-7f9c:4242", "metadata": {"addr": "10.0.0.7:8080"}, "ttl_ms": 30_000}),
    )
    .await;
    let mut permit_tokens = Vec::new();
    for owner in ["pool-a", "pool-b"] {
        let body = json!({"permits": 3, "owner": owner, "ttl_ms": 30_000});
        let permits = gw.client_as(WORKER).semaphores();
        let permit = permits
            .acquire("app:pool", &body, None, None)
            .await
            .done(201);
        permit_tokens.push(permit.token);
    }
    let (permits, _) = wait_for(
        &gw,
        &browser,
        "the semaphore's permits",
        "const row = Array.from(document.querySelectorAll('#semaphores tbody tr'))
             .find((tr) => tr.dataset.name === arguments[0]);
         return row ? row.querySelector('.permits').textContent : null;",
        json!(["app:pool"]),
    )
    .await;
    assert_eq!(permits, "2 of 3");

    // A fair lock with a waiter in another gateway: in the fair queue, with its owner and
    // priority, though not among the waiters here.
    let mut other = redis_config(&redis.url());
    other.api_keys = Some(lockgate::access::ApiKeys::from_json(KEYS).expect("keys"));
    let other = Gateway::start(other).await;
    let fair = acquire(&gw, "app:fair", json!({"owner": "erin", "ttl_ms": 30_000})).await;
    let fair_waiter = {
        let worker = other.client_as(WORKER);
        tokio::spawn(async move {
            let body = json!({"owner": "dave", "fair": true, "priority": 3, "wait_ms": 20_000});
            json_of(worker.acquire("app:fair", &body, None, None).await)
        })
    };
    let (row, _) = wait_for(
        &gw,
        &browser,
        "a fair waiter on app:fair",
        &format!("const r = (() => {{ {ROW} }})(); return r && r.queue !== '—' ? r : null;"),
        json!(["app:fair"]),
    )
    .await;
    let queue = row["queue"].as_str().expect("queue");
    assert!(queue.starts_with("1. dave (priority 3) "), "{queue}");
    assert_eq!(row["waiters"], "—", "{row}");
    assert_eq!(row["waiting"], "0 (1 queued, fair)", "{row}");

    // Markup in an owner and in metadata is shown as text and runs nothing.
    let owner = "<img src=x onerror=alert(1)>";
    let script = "</script><script>alert(2)</script>";
    let xss = acquire(
        &gw,
        "app:xss",
        json!({"owner": owner, "metadata": {"note": script}, "ttl_ms": 30_000}),
    )
    .await;
    let (row, _) = wait_for(&gw, &browser, "app:xss", ROW, json!(["app:xss"])).await;
    assert_eq!(row["owner"], owner);
    assert_eq!(row["meta"], json!({"note": script}).to_string());
    // No element was made of the markup (no image whose error handler could run, no script
    // but the page's own), and nothing has opened a dialog.
    let page = browser
        .run(
            "return {images: document.images.length, scripts: document.scripts.length};",
            json!([]),
        )
        .await;
    assert_eq!(page, json!({"images": 0, "scripts": 1}));
    assert_eq!(browser.open_dialog().await, None, "a dialog opened");
    release(&gw, "app:xss", &xss).await;

    // A key without `revoke`: no revoke button on any row.
    let buttons = browser
        .run(
            "return document.querySelectorAll('#locks tbody tr').length > 0
                 ? document.querySelectorAll('button.revoke').length : null;",
            json!([]),
        )
        .await;
    assert_eq!(buttons, 0);

    // A key with it: a button on every row; the README's screenshot.
    watch(
        &gw,
        &browser,
        "app:",
        ("operator", "operator-key-0123456789"),
    )
    .await;
    let (row, _) = wait_for(
        &gw,
        &browser,
        "a revoke button on app:held",
        &format!("const r = (() => {{ {ROW} }})(); return r && r.revoke ? r : null;"),
        json!(["app:held"]),
    )
    .await;
    assert_eq!(row["owner"], "worker-7f9c:4242");
    wait_for(
        &gw,
        &browser,
        "the waiter again",
        &format!("const r = (() => {{ {ROW} }})(); return r && r.waiting === '1' ? r : null;"),
        json!(["app:busy"]),
    )
    .await;
    wait_for(
        &gw,
        &browser,
        "the semaphore again",
        "return document.querySelectorAll('#semaphores tbody tr').length > 0 ? true : null;",
        json!([]),
    )
    .await;
    if let Some(path) = std::env::var_os("LOCKGATE_CONSOLE_SCREENSHOT") {
        std::fs::write(path, browser.screenshot().await).expect("write the screenshot");
    } else {
        assert!(!browser.screenshot().await.is_empty());
    }

    // Revoked from the page, behind its confirmation: the holder's next renew is 410.
    let asked = ask_revoke(&browser, "locks", "app:held").await;
    assert_eq!(
        asked,
        json!({"open": true, "what": "the lock", "name": "app:held"})
    );
    // The transitions are dated.
    let logged = browser
        .run(
            "return Array.from(document.querySelectorAll('#log time')).map((t) => t.textContent);",
            json!([]),
        )
        .await;
    let logged = logged.as_array().expect("log times");
    assert!(!logged.is_empty());
    for time in logged {
        assert!(is_date_time(time.as_str().expect("text")), "{time}");
    }
    browser
        .run("document.getElementById('confirm-yes').click();", json!([]))
        .await;
    wait_for(&gw, &browser, "app:held gone", NO_ROW, json!(["app:held"])).await;
    let body = RenewBody {
        ttl_ms: Some(30_000),
        ..RenewBody::default()
    };
    let worker = gw.client_as(WORKER);
    let renew = worker.renew("app:held", &token(&held), &body, None).await;
    let (status, problem) = json_of(renew);
    assert_eq!(status, 410, "{problem}");
    assert_eq!(
        problem["type"],
        "https://lockgate.dev/problems/lock-revoked"
    );

    // Every permit of a semaphore revoked from the page, behind its confirmation: its row
    // goes, and a holder's next renew is 410.
    let asked = ask_revoke(&browser, "semaphores", "app:pool").await;
    assert_eq!(
        asked,
        json!({"open": true, "what": "every permit of", "name": "app:pool"})
    );
    browser
        .run("document.getElementById('confirm-yes').click();", json!([]))
        .await;
    wait_for(
        &gw,
        &browser,
        "app:pool gone",
        "return document.querySelectorAll('#semaphores tbody tr').length === 0 ? true : null;",
        json!([]),
    )
    .await;
    let permits = gw.client_as(WORKER).semaphores();
    let renew = permits
        .renew("app:pool", &permit_tokens[0], &body, None)
        .await;
    let (status, problem) = json_of(renew);
    assert_eq!(status, 410, "{problem}");

    release(&gw, "app:busy", &busy).await;
    let (status, _) = waiter.await.expect("waiter");
    assert_eq!(status, 201);
    release(&gw, "app:fair", &fair).await;
    let (status, _) = fair_waiter.await.expect("fair waiter");
    assert_eq!(status, 201);
    let errors: Vec<(String, String)> = browser
        .console()
        .await
        .into_iter()
        .filter(|(level, _)| level == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

/// The page's answers carry a strict policy: no inline script, this origin only, no frames;
/// `--console=false` serves none of it.
#[tokio::test]
async fn the_console_is_served_with_a_strict_policy_and_can_be_turned_off() {
    let gw = Gateway::dev().await;
    for path in ["/ui", "/ui/console.js", "/ui/console.css"] {
        let response = console_file(&gw, path).await;
        assert_eq!(response.status(), 200, "{path}");
        let csp = response.headers()["content-security-policy"]
            .to_str()
            .expect("CSP");
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{path}: {csp}");
        assert_eq!(response.headers()["x-frame-options"], "DENY");
    }
    let page = console_file(&gw, "/ui").await.text().await.expect("text");
    // The Watch button waits for the script that handles it: no native submission before.
    assert!(page.contains(r#"id="connect" disabled"#), "{page}");
    // No inline script or style, nothing from elsewhere.
    assert!(
        !page.contains("<script>") && !page.contains("<style"),
        "{page}"
    );
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "{page}"
    );

    let mut cfg = crate::support::gateway::config(lockgate::config::BackendChoice::Memory);
    cfg.console = false;
    let off = Gateway::start(cfg).await;
    for path in ["/ui", "/ui/console.js", "/ui/console.css"] {
        let response = console_file(&off, path).await;
        assert_eq!(response.status(), 404, "{path}");
    }
}

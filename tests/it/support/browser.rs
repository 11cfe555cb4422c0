//! A headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`, which
//! scripts/test.sh installs where missing): `chromedriver` started on a free port, one browser
//! session, both ended on drop. Only what the console's test needs: open a page, run a script
//! in it, read the browser's console, look for a JavaScript dialog, take a screenshot.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::eventually;
use super::redis::free_port;

pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    session: String,
    base: String,
}

impl Browser {
    /// A new headless browser, its window `width` × `height` CSS pixels.
    pub async fn start(width: u32, height: u32) -> Self {
        let chromium = which("chromium").or_else(|| which("chromium-browser"));
        let (Some(chromium), Some(chromedriver)) = (chromium, which("chromedriver")) else {
            panic!(
                "the console's browser test needs chromium and chromedriver: run scripts/test.sh \
                 (it installs them), or apt-get install chromium chromium-driver"
            );
        };
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        eventually(Duration::from_secs(20), "chromedriver is ready", || async {
            let status: Value = http
                .get(format!("{base}/status"))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            (status["value"]["ready"] == true).then_some(())
        })
        .await;
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-extensions", "--hide-scrollbars",
                    format!("--window-size={width},{height}"),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let created: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("session JSON");
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Self {
            driver,
            http,
            session,
            base,
        }
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut request = self.http.request(method, url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request
            .send()
            .await
            .expect("webdriver command")
            .json()
            .await
            .expect("webdriver JSON");
        answer["value"].clone()
    }

    /// Opens `url` and waits until its `load` event has run.
    ///
    /// WebDriver's navigation is meant to wait for that, but chromedriver on a loaded machine
    /// sometimes answers earlier, while the page is still parsing: a script run then finds no
    /// handlers bound (seen as a form submitted natively, before the page's `DOMContentLoaded`
    /// handler). So the page itself is asked until it is at `url` (not still the page before)
    /// and its navigation timing says the load is done.
    pub async fn open(&self, url: &str) {
        let value = self
            .command(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
        assert!(value.is_null(), "navigation failed: {value}");
        eventually(Duration::from_secs(20), "the page has loaded", || async {
            let loaded = self
                .run(
                    "const [entry] = performance.getEntriesByType('navigation');
                     return location.href === arguments[0]
                         && entry !== undefined && entry.loadEventEnd > 0;",
                    json!([url]),
                )
                .await;
            (loaded == true).then_some(())
        })
        .await;
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page; its `return`.
    /// Panics on a WebDriver error, such as a JavaScript dialog left open.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        let value = self
            .command(
                reqwest::Method::POST,
                "/execute/sync",
                Some(json!({"script": script, "args": args})),
            )
            .await;
        if let Some(error) = value.get("error") {
            panic!("script failed ({error}): {value}");
        }
        value
    }

    /// The text of a JavaScript dialog (`alert`, `confirm`, `prompt`) open now, if any.
    pub async fn open_dialog(&self) -> Option<String> {
        let value = self
            .command(reqwest::Method::GET, "/alert/text", None)
            .await;
        match value.get("error") {
            Some(error) if error == "no such alert" => None,
            Some(error) => panic!("alert text: {error}: {value}"),
            None => Some(value.as_str().unwrap_or_default().to_owned()),
        }
    }

    /// The browser console's entries since the last call: (level, message).
    pub async fn console(&self) -> Vec<(String, String)> {
        let value = self
            .command(
                reqwest::Method::POST,
                "/se/log",
                Some(json!({"type": "browser"})),
            )
            .await;
        value
            .as_array()
            .unwrap_or_else(|| panic!("browser log: {value}"))
            .iter()
            .map(|entry| {
                (
                    entry["level"].as_str().unwrap_or_default().to_owned(),
                    entry["message"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// A PNG of the window.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        let value = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        base64::engine::general_purpose::STANDARD
            .decode(value.as_str().expect("screenshot data"))
            .expect("base64 PNG")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session ends the browser (killing chromedriver alone would leave it
        // running); a plain blocking request, as drop cannot await.
        if let Some(address) = self.base.strip_prefix("http://")
            && let Ok(mut stream) = std::net::TcpStream::connect(address)
        {
            use std::io::{Read, Write};
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session
            );
            if stream.write_all(request.as_bytes()).is_ok() {
                let _ = stream.read_to_end(&mut Vec::new());
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn which(program: &str) -> Option<String> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
            .map(|path| path.to_string_lossy().into_owned())
    })
}

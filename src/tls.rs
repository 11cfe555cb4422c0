//! Process-wide TLS set-up, shared by the server (`rediss://` to Redis) and the client
//! (`lockgate run` against an `https://` gateway). A leaf: it imports nothing of the crate.

/// rustls needs a process-wide crypto provider chosen explicitly; ring is compiled in.
pub fn install_crypto_provider() {
    // Fails only when one is installed already, which is just as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

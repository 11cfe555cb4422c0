//! How the bytes of a connection to a Redis node travel: TCP (or TLS), opened by redis-rs, in
//! production; or a [`Transport`] of the embedder's, which gives a byte stream for a node's
//! address. The deterministic simulation (sim/redis) is the one embedder: its gateways reach
//! simulated servers over an in-memory network, through the same `backend::redis` code and
//! redis-rs as in production, from the connection's first command on.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;

use redis::aio::{MultiplexedConnection, PubSub};
use redis::{AsyncConnectionConfig, Client, RedisResult};
use tokio::io::{AsyncRead, AsyncWrite};

/// A connection's byte stream.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<S: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for S {}

/// A stream being opened.
pub type Opening = Pin<Box<dyn Future<Output = io::Result<Box<dyn Stream>>> + Send>>;

/// Opens streams to Redis nodes by their address (`host:port`, as in the node's URL).
pub trait Transport: Send + Sync + fmt::Debug {
    fn open(&self, address: &str) -> Opening;
}

/// A connection to `client`'s node for commands: over `transport` when there is one.
pub async fn multiplexed(
    client: &Client,
    config: &AsyncConnectionConfig,
    transport: Option<&dyn Transport>,
) -> RedisResult<MultiplexedConnection> {
    let Some(transport) = transport else {
        return client
            .get_multiplexed_async_connection_with_config(config)
            .await;
    };
    let info = client.get_connection_info();
    let stream = transport.open(&info.addr().to_string()).await?;
    let (conn, driver) =
        MultiplexedConnection::new_with_config(info.redis_settings(), stream, config.clone())
            .await?;
    tokio::spawn(driver);
    Ok(conn)
}

/// A pub/sub connection to `client`'s node: over `transport` when there is one.
pub async fn pubsub(client: &Client, transport: Option<&dyn Transport>) -> RedisResult<PubSub> {
    let Some(transport) = transport else {
        return client.get_async_pubsub().await;
    };
    let info = client.get_connection_info();
    let stream = transport.open(&info.addr().to_string()).await?;
    PubSub::new(info.redis_settings(), stream).await
}

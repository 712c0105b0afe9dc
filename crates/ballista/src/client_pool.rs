//! Reused connections for a qprof executor's shuffle reads.
//!
//! Ballista's own executors fetch shuffle partitions through a pool of Flight clients, one
//! connection per other executor kept open between reads; its pool is private to its
//! executor crate. Without one, every shuffle read of every task opens a TCP connection
//! and an HTTP/2 session, a millisecond or more per read. [`ConnectionPool`] is the same
//! pool for qprof's engine: idle clients per address and configuration, most recently used
//! first, those idle longer than the time to live dropped.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ballista_core::client::BallistaClient;
use ballista_core::client_pool::{BallistaClientPool, PooledClient};
use ballista_core::error::Result;
use ballista_core::extension::BallistaConfigGrpcEndpoint;
use ballista_core::utils::GrpcClientConfig;

/// Where a client connects, and how.
type Key = (String, u16, GrpcClientConfig);

/// Idle clients by where they connect, oldest first.
type Idle = HashMap<Key, Vec<(BallistaClient, Instant)>>;

/// A pool of Flight clients, shared by every task of an executor.
#[derive(Clone)]
pub struct ConnectionPool {
    idle: Arc<Mutex<Idle>>,
    time_to_live: Duration,
}

impl fmt::Debug for ConnectionPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionPool")
            .field("time_to_live", &self.time_to_live)
            .field("idle", &self.idle_count())
            .finish()
    }
}

impl ConnectionPool {
    /// A pool whose clients are dropped once idle for longer than `time_to_live`.
    pub fn new(time_to_live: Duration) -> ConnectionPool {
        ConnectionPool {
            idle: Arc::new(Mutex::new(HashMap::new())),
            time_to_live,
        }
    }

    /// Idle clients in the pool now.
    pub fn idle_count(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(Vec::len)
            .sum()
    }

    /// The most recently returned client for `key` still within its time to live; the
    /// expired ones of `key` are dropped.
    fn take(&self, key: &Key) -> Option<BallistaClient> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        self.drop_expired(&mut idle);
        idle.get_mut(key)?.pop().map(|(client, _)| client)
    }

    /// Drops the clients idle for longer than the time to live (a few addresses: one per
    /// executor of the cluster).
    fn drop_expired(&self, idle: &mut Idle) {
        let deadline = Instant::now().checked_sub(self.time_to_live);
        idle.retain(|_, clients| {
            clients.retain(|(_, since)| deadline.is_none_or(|d| *since > d));
            !clients.is_empty()
        });
    }
}

#[async_trait::async_trait]
impl BallistaClientPool for ConnectionPool {
    async fn acquire(
        &self,
        host: &str,
        port: u16,
        config: &GrpcClientConfig,
        customize_endpoint: Option<Arc<BallistaConfigGrpcEndpoint>>,
    ) -> Result<PooledClient> {
        let key = (host.to_string(), port, config.clone());
        let client = match self.take(&key) {
            Some(client) => client,
            None => {
                BallistaClient::try_new(
                    host,
                    port,
                    config.max_message_size,
                    config.use_tls,
                    customize_endpoint,
                    config.io_retries_times,
                    config.io_retry_wait_time_ms,
                    config.initial_connection_window_size,
                    config.initial_stream_window_size,
                )
                .await?
            }
        };
        let idle = Arc::clone(&self.idle);
        Ok(PooledClient::new(
            client,
            Box::new(move |client| {
                idle.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(key)
                    .or_default()
                    .push((client, Instant::now()));
            }),
        ))
    }

    async fn evict_idle(&self) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        self.drop_expired(&mut idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The peers a listener accepted, in order.
    type Accepted = Arc<std::sync::Mutex<Vec<std::net::SocketAddr>>>;

    /// A port that accepts TCP connections and lists their peers (an HTTP/2 client's
    /// handshake waits for nothing from the server).
    fn counting_listener() -> (u16, Accepted) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Accepted::default();
        let peers = Arc::clone(&accepted);
        std::thread::spawn(move || {
            let mut open = Vec::new();
            for stream in listener.incoming().flatten() {
                if let Ok(peer) = stream.peer_addr() {
                    peers.lock().unwrap().push(peer);
                }
                open.push(stream);
            }
        });
        (port, accepted)
    }

    /// The connections the clients made to `port` so far: a marker connection goes
    /// last, and the listener accepts in order, so once it has the marker it has them
    /// all (earlier markers are not counted).
    async fn settled(port: u16, accepted: &Accepted) -> usize {
        let marker = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let me = marker.local_addr().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let peers = accepted.lock().unwrap().clone();
            if let Some(at) = peers.iter().position(|p| *p == me) {
                MARKERS.with(|m| m.borrow_mut().push(me));
                let markers = MARKERS.with(|m| m.borrow().clone());
                return peers[..at].iter().filter(|p| !markers.contains(p)).count();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the marker never came"
            );
            tokio::task::yield_now().await;
        }
    }

    thread_local! {
        /// The marker connections made so far.
        static MARKERS: std::cell::RefCell<Vec<std::net::SocketAddr>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    #[tokio::test]
    async fn a_returned_client_is_reused_until_it_expires() {
        let (port, accepted) = counting_listener();
        let config = GrpcClientConfig::default();
        let pool = ConnectionPool::new(Duration::from_secs(60));
        let first = pool
            .acquire("127.0.0.1", port, &config, None)
            .await
            .unwrap();
        assert_eq!(pool.idle_count(), 0);
        drop(first);
        assert_eq!(pool.idle_count(), 1);
        let second = pool
            .acquire("127.0.0.1", port, &config, None)
            .await
            .unwrap();
        assert_eq!(pool.idle_count(), 0);
        drop(second);
        assert_eq!(settled(port, &accepted).await, 1);

        // a client idle past its time to live is dropped, and the next read connects anew
        let expiring = ConnectionPool::new(Duration::ZERO);
        drop(
            expiring
                .acquire("127.0.0.1", port, &config, None)
                .await
                .unwrap(),
        );
        drop(
            expiring
                .acquire("127.0.0.1", port, &config, None)
                .await
                .unwrap(),
        );
        assert_eq!(settled(port, &accepted).await, 3);
        expiring.evict_idle().await;
        assert_eq!(expiring.idle_count(), 0);
    }

    #[tokio::test]
    async fn a_discarded_client_does_not_come_back() {
        let (port, accepted) = counting_listener();
        let config = GrpcClientConfig::default();
        let pool = ConnectionPool::new(Duration::from_secs(60));
        pool.acquire("127.0.0.1", port, &config, None)
            .await
            .unwrap()
            .discard();
        assert_eq!(pool.idle_count(), 0);
        drop(
            pool.acquire("127.0.0.1", port, &config, None)
                .await
                .unwrap(),
        );
        assert_eq!(settled(port, &accepted).await, 2);
    }
}

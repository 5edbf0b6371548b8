//! The gate's Redis connection: one server or a cluster, shared by every
//! purchase (calls pipelined on it). Its driver runs on the server's
//! runtime: on a thread of its own (tried), every answer woke its purchase
//! from outside the runtime, into the queue the workers look at least
//! often, and under a rush's first wave the admitted purchases waited
//! 30-80 ms for answers Redis had given in microseconds.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use redis::{
    AsyncConnectionConfig,
    aio::{ConnectionLike, MultiplexedConnection},
    cluster::ClusterClient,
    cluster_async::ClusterConnection,
};

use super::settings::{GateRedis, GateSettings};

/// A client of either kind.
#[derive(Clone)]
pub(super) enum Client {
    Server(redis::Client, Box<AsyncConnectionConfig>),
    Cluster(Box<ClusterClient>),
}

impl Client {
    pub(super) fn open(redis: &GateRedis, settings: &GateSettings) -> redis::RedisResult<Self> {
        Ok(match redis {
            // The gate bounds every call itself; these only bound the rest.
            GateRedis::Server(url) => Self::Server(
                redis::Client::open(url.as_str())?,
                Box::new(
                    AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(settings.connect_timeout()))
                        .set_response_timeout(Some(settings.connect_timeout()))
                        .set_pipeline_buffer_size(PIPELINE_BUFFER),
                ),
            ),
            GateRedis::Cluster(nodes) => {
                let nodes = nodes.iter().map(|node| {
                    if node.contains("://") {
                        node.clone()
                    } else {
                        format!("redis://{node}")
                    }
                });
                // The gate bounds every call itself (a purchase's within
                // `timeout`, a rebuild's within the longer budget), and
                // falls back to Postgres rather than wait: few retries
                // (redirections after a resharding are retries too).
                Self::Cluster(Box::new(
                    ClusterClient::builder(nodes)
                        .connection_timeout(settings.connect_timeout())
                        .response_timeout(settings.connect_timeout())
                        .retries(3)
                        .build()?,
                ))
            }
        })
    }

    pub(super) async fn connect(&self) -> redis::RedisResult<Connections> {
        Ok(match self {
            Self::Server(client, config) => Connections::Server(
                client
                    .get_multiplexed_async_connection_with_config(config)
                    .await?,
            ),
            Self::Cluster(client) => {
                let lanes = futures_util::future::try_join_all(
                    (0..CLUSTER_LANES).map(|_| client.get_async_connection()),
                )
                .await?;
                Connections::Cluster(Arc::new(Lanes {
                    lanes,
                    next: AtomicUsize::new(0),
                }))
            }
        })
    }
}

/// Cluster connections the gate spreads its calls over, in turn. The redis
/// crate queues at most 100 calls per cluster connection (fixed, not
/// configurable): with one, a burst's first wave waited for room as it did
/// before [`PIPELINE_BUFFER`], and 380 of its calls timed out (fell back to
/// Postgres alone). Each lane has its own connection to every node.
pub(super) const CLUSTER_LANES: usize = 16;

/// What the gate keeps, made once and shared by every call.
#[derive(Clone)]
pub(super) enum Connections {
    Server(MultiplexedConnection),
    Cluster(Arc<Lanes>),
}

pub(super) struct Lanes {
    lanes: Vec<ClusterConnection>,
    next: AtomicUsize,
}

impl Connections {
    /// A handle for one call: the server's connection, or the cluster's
    /// next lane.
    pub(super) fn pick(&self) -> Connection {
        match self {
            Self::Server(conn) => Connection::Server(conn.clone()),
            Self::Cluster(cluster) => {
                let turn = cluster.next.fetch_add(1, Ordering::Relaxed) % cluster.lanes.len();
                Connection::Cluster(cluster.lanes[turn].clone())
            }
        }
    }
}

/// Calls queued for the connection's writer at most (the redis crate's
/// default is 50). A burst's first wave makes a call per purchase at once;
/// beyond the bound, a call waited for room, and each wake-up of a waiting
/// caller went to the back of the busy runtime's queue: calls timed out
/// before they were sent. Each waiting call costs a few bytes.
const PIPELINE_BUFFER: usize = 8192;

/// One call's connection, of either kind: concurrent calls share it
/// (pipelined).
#[derive(Clone)]
pub(super) enum Connection {
    Server(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Self::Server(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Self::Server(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Server(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}

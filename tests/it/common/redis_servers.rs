//! Redis servers of a test's own, on free loopback ports, killed on drop:
//! one server ([`OwnRedis`], never the shared one flushed) or a 3-master
//! Redis Cluster ([`RedisCluster`]).

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use deadpool_redis::redis;

/// One Redis command to the server at `url` (no cluster redirection).
pub async fn cmd_at<T: redis::FromRedisValue>(
    url: &str,
    cmd: &mut redis::Cmd,
) -> redis::RedisResult<T> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    cmd.query_async(&mut conn).await
}

/// A `redis-server` of the test's own.
pub struct OwnRedis {
    pub port: u16,
    child: Child,
}

impl OwnRedis {
    fn spawn(port: u16, extra: &[&str]) -> Self {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian package redis-server)");
        Self { port, child }
    }

    pub fn start_on(port: u16) -> Self {
        Self::spawn(port, &[])
    }

    pub fn start() -> Self {
        Self::start_on(super::free_port())
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub async fn until_up(&self) {
        for _ in 0..100 {
            if self.cmd::<String>(&mut redis::cmd("PING")).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server on {} never answered", self.port);
    }

    pub async fn cmd<T: redis::FromRedisValue>(
        &self,
        cmd: &mut redis::Cmd,
    ) -> redis::RedisResult<T> {
        cmd_at(&self.url(), cmd).await
    }

    /// Scripts Redis has run since it started (EVALSHA and EVAL calls).
    pub async fn scripts_run(&self) -> i64 {
        self.calls(&["evalsha", "eval"]).await
    }

    /// Calls of these commands since Redis started (`INFO commandstats`).
    pub async fn calls(&self, commands: &[&str]) -> i64 {
        let info: String = self
            .cmd(redis::cmd("INFO").arg("commandstats"))
            .await
            .unwrap();
        info.lines()
            .filter(|line| {
                commands
                    .iter()
                    .any(|command| line.starts_with(&format!("cmdstat_{command}:")))
            })
            .filter_map(|line| {
                line.split_once("calls=")?
                    .1
                    .split(',')
                    .next()?
                    .parse::<i64>()
                    .ok()
            })
            .sum()
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Redis Cluster of three masters (no replicas) in a temporary directory
/// of its own; the servers are killed and the directory removed on drop.
pub struct RedisCluster {
    pub masters: Vec<OwnRedis>,
    dir: PathBuf,
}

impl RedisCluster {
    pub async fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("stampede-cluster-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let masters: Vec<OwnRedis> = (0..3)
            .map(|_| {
                let port = super::free_port();
                let config = dir.join(format!("nodes-{port}.conf"));
                OwnRedis::spawn(
                    port,
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        config.to_str().unwrap(),
                        "--dir",
                        dir.to_str().unwrap(),
                    ],
                )
            })
            .collect();
        let cluster = Self { masters, dir };
        for master in &cluster.masters {
            master.until_up().await;
        }
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(cluster.nodes())
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .expect("redis-cli (Debian package redis-tools)");
        assert!(created.success(), "redis-cli --cluster create: {created}");
        cluster.until_ok().await;
        cluster
    }

    /// `host:port` of every master.
    pub fn nodes(&self) -> Vec<String> {
        self.masters
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.port))
            .collect()
    }

    /// Every node says `cluster_state:ok` and knows all three masters.
    async fn until_ok(&self) {
        for _ in 0..200 {
            let mut ok = true;
            for master in &self.masters {
                let info: String = master
                    .cmd(redis::cmd("CLUSTER").arg("INFO"))
                    .await
                    .unwrap_or_default();
                ok &= info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3");
            }
            if ok {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the cluster never reached cluster_state:ok");
    }

    /// The index of the master serving `key` (the others answer MOVED).
    pub async fn master_of(&self, key: &str) -> usize {
        for (i, master) in self.masters.iter().enumerate() {
            let answer: redis::RedisResult<redis::Value> =
                master.cmd(redis::cmd("EXISTS").arg(key)).await;
            if answer.is_ok() {
                return i;
            }
        }
        panic!("no master serves {key}");
    }

    /// Keys stored on each master.
    pub async fn keys_per_master(&self) -> Vec<i64> {
        let mut counts = Vec::new();
        for master in &self.masters {
            counts.push(master.cmd(&mut redis::cmd("DBSIZE")).await.unwrap());
        }
        counts
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for master in &mut self.masters {
            master.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

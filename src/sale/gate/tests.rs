//! The scripts alone, against the Redis of `scripts/test`
//! (127.0.0.1:6379, or `REDIS_URL`), under a key tag of their own.

use std::time::Duration;

use redis::{
    Script,
    aio::{ConnectionLike as _, MultiplexedConnection},
};
use uuid::Uuid;

use super::{
    connection::Client,
    scripts::{ADMIT, GIVE_BACK, REBUILD},
    settings::{GateRedis, GateSettings},
    state::unix_ms,
};

async fn redis() -> MultiplexedConnection {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

struct Keys {
    stock: String,
    record: String,
    inflight: String,
}

impl Keys {
    fn new() -> Self {
        let tag = Uuid::new_v4();
        Self {
            stock: format!("stampede:test:unit:{{tt:{tag}}}:stock"),
            record: format!("stampede:test:unit:{{tt:{tag}}}:key:ada"),
            inflight: format!("stampede:test:unit:{{tt:{tag}}}:inflight"),
        }
    }

    async fn delete(&self, conn: &mut MultiplexedConnection) {
        let _: i64 = redis::cmd("DEL")
            .arg(&self.stock)
            .arg(&self.record)
            .arg(&self.inflight)
            .query_async(conn)
            .await
            .unwrap();
    }
}

/// The REBUILD script in `mode`, for 5 left (limits 4 per buyer, 2 per
/// order), with `seq` as read before the snapshot and the in-flight cutoff.
fn rebuild_as(
    keys: &Keys,
    mode: &str,
    generation: &str,
    seq: &str,
    cutoff: u64,
) -> redis::ScriptInvocation<'static> {
    static SCRIPT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(REBUILD));
    let mut script = SCRIPT.prepare_invoke();
    script
        .key(&keys.stock)
        .key(&keys.inflight)
        .arg(generation)
        .arg(5)
        .arg(4)
        .arg(2)
        .arg(60)
        .arg(mode)
        .arg(seq)
        .arg(cutoff);
    script
}

async fn rebuild(conn: &mut MultiplexedConnection, keys: &Keys, generation: &str, left: i64) {
    let _: i64 = Script::new(REBUILD)
        .key(&keys.stock)
        .key(&keys.inflight)
        .arg(generation)
        .arg(left)
        .arg(4)
        .arg(2)
        .arg(60)
        .arg("always")
        .arg("")
        .arg(0)
        .invoke_async(conn)
        .await
        .unwrap();
}

async fn admit(conn: &mut MultiplexedConnection, keys: &Keys) -> (String, i64, i64, String) {
    Script::new(ADMIT)
        .key(&keys.stock)
        .key(&keys.record)
        .key(&keys.inflight)
        .arg("b:ada")
        .arg(2)
        .arg(60)
        .arg(unix_ms())
        .invoke_async(conn)
        .await
        .unwrap()
}

async fn in_flight(conn: &mut MultiplexedConnection, keys: &Keys) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(&keys.inflight)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .unwrap()
}

async fn seq(conn: &mut MultiplexedConnection, keys: &Keys) -> String {
    redis::cmd("HGET")
        .arg(&keys.stock)
        .arg("seq")
        .query_async(conn)
        .await
        .unwrap()
}

async fn give_back(conn: &mut MultiplexedConnection, keys: &Keys, generation: &str) -> i64 {
    Script::new(GIVE_BACK)
        .key(&keys.stock)
        .key(&keys.record)
        .key(&keys.inflight)
        .arg(format!("{generation}:2:b:ada"))
        .arg(generation)
        .arg(2)
        .arg("b:ada")
        .invoke_async(conn)
        .await
        .unwrap()
}

async fn counts(conn: &mut MultiplexedConnection, keys: &Keys) -> (Option<i64>, Option<i64>) {
    redis::cmd("HMGET")
        .arg(&keys.stock)
        .arg("left")
        .arg("b:ada")
        .query_async(conn)
        .await
        .unwrap()
}

/// Within its generation a give-back adds back exactly once (a second
/// one of the same admission changes nothing); after a rebuild it adds
/// nothing (the rebuild read Postgres without the admission).
#[tokio::test]
async fn a_give_back_counts_once_and_only_in_its_generation() {
    let mut conn = redis().await;
    let keys = Keys::new();
    rebuild(&mut conn, &keys, "g1", 5).await;
    let admitted = admit(&mut conn, &keys).await;
    assert_eq!(admitted, ("admitted".into(), 3, 2, "g1".into()));
    assert_eq!(
        in_flight(&mut conn, &keys).await,
        std::slice::from_ref(&keys.record)
    );
    assert_eq!(give_back(&mut conn, &keys, "g1").await, 2);
    assert!(in_flight(&mut conn, &keys).await.is_empty());
    assert_eq!(counts(&mut conn, &keys).await, (Some(5), None));
    assert_eq!(give_back(&mut conn, &keys, "g1").await, 0);
    assert_eq!(counts(&mut conn, &keys).await, (Some(5), None));

    // Admitted again (the record went with the give-back), then a
    // rebuild: Postgres has 4 left and no order of this buyer.
    let admitted = admit(&mut conn, &keys).await;
    assert_eq!(admitted, ("admitted".into(), 3, 2, "g1".into()));
    rebuild(&mut conn, &keys, "g2", 4).await;
    assert_eq!(give_back(&mut conn, &keys, "g1").await, 1);
    assert_eq!(counts(&mut conn, &keys).await, (Some(4), None));
    let record: i64 = redis::cmd("EXISTS")
        .arg(&keys.record)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(record, 0, "the record outlived its give-back");
    assert!(in_flight(&mut conn, &keys).await.is_empty());
    keys.delete(&mut conn).await;
}

/// A rebuild for a missing hash leaves a hash another instance built
/// (and admitted under) alone; a stale or periodic one replaces it.
#[tokio::test]
async fn a_rebuild_for_a_missing_hash_keeps_one_already_there() {
    let mut conn = redis().await;
    let keys = Keys::new();
    let written: i64 = rebuild_as(&keys, "missing", "g1", "", 0)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(written, 1, "built where there was none");
    admit(&mut conn, &keys).await;
    let written: i64 = rebuild_as(&keys, "missing", "g2", "", 0)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(written, 0);
    assert_eq!(counts(&mut conn, &keys).await, (Some(3), Some(2)));
    let written: i64 = rebuild_as(&keys, "always", "g3", "", 0)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(written, 1);
    assert_eq!(counts(&mut conn, &keys).await, (Some(5), None));
    keys.delete(&mut conn).await;
}

/// A quiet rebuild writes only if no admission came since `seq` was read
/// and none is in flight; one older than the cutoff is dropped as lost.
/// `seq` counts admissions and rebuilds across generations.
#[tokio::test]
async fn a_quiet_rebuild_waits_for_the_admissions_in_flight() {
    let mut conn = redis().await;
    let keys = Keys::new();
    rebuild(&mut conn, &keys, "g1", 5).await;
    assert_eq!(seq(&mut conn, &keys).await, "1");
    admit(&mut conn, &keys).await;
    assert_eq!(seq(&mut conn, &keys).await, "2");
    let busy: i64 = rebuild_as(&keys, "quiet", "g2", "2", 0)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(busy, 2, "rebuilt under an admission in flight");
    assert_eq!(counts(&mut conn, &keys).await, (Some(3), Some(2)));

    // Settled (as after its commit), but `seq` read before it was admitted.
    let _: i64 = redis::cmd("ZREM")
        .arg(&keys.inflight)
        .arg(&keys.record)
        .query_async(&mut conn)
        .await
        .unwrap();
    let busy: i64 = rebuild_as(&keys, "quiet", "g2", "1", 0)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(busy, 2, "rebuilt over an admission after its snapshot");
    let written: i64 = rebuild_as(&keys, "quiet", "g2", "2", 0)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(written, 1);
    assert_eq!(counts(&mut conn, &keys).await, (Some(5), None));
    assert_eq!(seq(&mut conn, &keys).await, "3");

    // An admission never settled: in flight until the cutoff passes it.
    let _: i64 = redis::cmd("DEL")
        .arg(&keys.record)
        .query_async(&mut conn)
        .await
        .unwrap();
    admit(&mut conn, &keys).await;
    let admitted_at: u64 = redis::cmd("ZSCORE")
        .arg(&keys.inflight)
        .arg(&keys.record)
        .query_async(&mut conn)
        .await
        .unwrap();
    let busy: i64 = rebuild_as(&keys, "quiet", "g3", "4", admitted_at - 1)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(busy, 2);
    let written: i64 = rebuild_as(&keys, "quiet", "g3", "4", admitted_at)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(written, 1, "a lost admission held the rebuild back");
    assert!(in_flight(&mut conn, &keys).await.is_empty());
    assert_eq!(counts(&mut conn, &keys).await, (Some(5), None));
    keys.delete(&mut conn).await;
}

#[test]
fn the_gate_is_logged_without_its_password() {
    let server = GateRedis::Server("redis://stampede:s3cret@cache.internal:6380/2".into());
    assert_eq!(
        server.to_string(),
        "redis://stampede:***@cache.internal:6380/2"
    );
    let plain = GateRedis::Server("redis://127.0.0.1:6379".into());
    assert_eq!(plain.to_string(), "redis://127.0.0.1:6379");
    let cluster = GateRedis::Cluster(vec![
        "127.0.0.1:7000".into(),
        "redis://:hunter2@127.0.0.1:7001".into(),
    ]);
    assert_eq!(
        cluster.to_string(),
        "cluster 127.0.0.1:7000,redis://:***@127.0.0.1:7001"
    );
}

#[test]
fn connecting_and_rebuilding_get_ten_purchase_timeouts_and_at_least_a_second() {
    let settings = |ms| GateSettings {
        timeout: Duration::from_millis(ms),
        ..GateSettings::default()
    };
    assert_eq!(settings(300).connect_timeout(), Duration::from_secs(3));
    assert_eq!(settings(50).connect_timeout(), Duration::from_secs(1));
}

#[tokio::test]
async fn a_connection_tells_the_database_of_its_url() {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let url = format!("{}/3", url.trim_end_matches('/'));
    let client = Client::open(&GateRedis::Server(url), &GateSettings::default()).unwrap();
    let conn = client.connect().await.unwrap();
    assert_eq!(conn.pick().get_db(), 3);
}

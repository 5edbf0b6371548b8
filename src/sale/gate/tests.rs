//! The scripts alone, against the Redis of `scripts/test`
//! (127.0.0.1:6379, or `REDIS_URL`), under a key tag of their own.

use super::*;

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
}

async fn rebuild(conn: &mut MultiplexedConnection, keys: &Keys, generation: &str, left: i64) {
    let _: i64 = Script::new(REBUILD)
        .key(&keys.stock)
        .arg(generation)
        .arg(left)
        .arg(4)
        .arg(2)
        .arg(60)
        .arg("always")
        .invoke_async(conn)
        .await
        .unwrap();
}

async fn admit(conn: &mut MultiplexedConnection, keys: &Keys) -> (String, i64, i64, String) {
    Script::new(ADMIT)
        .key(&keys.stock)
        .key(&keys.record)
        .arg("b:ada")
        .arg(2)
        .arg(60)
        .invoke_async(conn)
        .await
        .unwrap()
}

async fn give_back(conn: &mut MultiplexedConnection, keys: &Keys, generation: &str) -> i64 {
    Script::new(GIVE_BACK)
        .key(&keys.stock)
        .key(&keys.record)
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
    let tag = Uuid::new_v4();
    let keys = Keys {
        stock: format!("stampede:test:unit:{{tt:{tag}}}:stock"),
        record: format!("stampede:test:unit:{{tt:{tag}}}:key:ada"),
    };
    rebuild(&mut conn, &keys, "g1", 5).await;
    let admitted = admit(&mut conn, &keys).await;
    assert_eq!(admitted, ("admitted".into(), 3, 2, "g1".into()));
    assert_eq!(give_back(&mut conn, &keys, "g1").await, 2);
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
    let _: i64 = redis::cmd("DEL")
        .arg(&keys.stock)
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// A rebuild for a missing hash leaves a hash another instance built
/// (and admitted under) alone; a stale or periodic one replaces it.
#[tokio::test]
async fn a_rebuild_for_a_missing_hash_keeps_one_already_there() {
    let mut conn = redis().await;
    let tag = Uuid::new_v4();
    let keys = Keys {
        stock: format!("stampede:test:unit:{{tt:{tag}}}:stock"),
        record: format!("stampede:test:unit:{{tt:{tag}}}:key:ada"),
    };
    let script = Script::new(REBUILD);
    let rebuild_as = |mode: &'static str, generation: &'static str| {
        let mut script = script.prepare_invoke();
        script
            .key(&keys.stock)
            .arg(generation)
            .arg(5)
            .arg(4)
            .arg(2)
            .arg(60)
            .arg(mode);
        script
    };
    let written: i64 = rebuild_as("missing", "g1")
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(written, 1, "built where there was none");
    admit(&mut conn, &keys).await;
    let written: i64 = rebuild_as("missing", "g2")
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(written, 0);
    assert_eq!(counts(&mut conn, &keys).await, (Some(3), Some(2)));
    let written: i64 = rebuild_as("always", "g3")
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(written, 1);
    assert_eq!(counts(&mut conn, &keys).await, (Some(5), None));
    let _: i64 = redis::cmd("DEL")
        .arg(&keys.stock)
        .arg(&keys.record)
        .query_async(&mut conn)
        .await
        .unwrap();
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
    assert_eq!(conn.get_db(), 3);
}

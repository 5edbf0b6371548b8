//! Joining: who may, the solved challenge, the cap per client address.

use super::*;

#[sqlx::test]
async fn one_client_address_holds_a_bounded_number_of_entries(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 3);
    let at = now();
    let join = |ip: &str| {
        let ip: std::net::IpAddr = ip.parse().unwrap();
        let (pool, rooms) = (pool.clone(), rooms.clone());
        async move {
            let proof = common::proof(&rooms, event_id, at);
            waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), Some(ip), at).await
        }
    };
    for ip in ["2001:db8::1", "2001:db8::2", "2001:db8::ffff"] {
        join(ip).await.unwrap();
    }
    // The same /64 is the same client.
    let refused = join("2001:db8::9").await;
    assert!(
        matches!(
            refused,
            Err(stampede::error::AppError::TooManyEntries { max: 3 })
        ),
        "{refused:?}"
    );
    join("2001:db8:0:1::1").await.unwrap();
    join("192.0.2.7").await.unwrap();
    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(entries, 5);
}

#[sqlx::test]
async fn nobody_joins_a_draft_a_room_that_is_off_or_a_queue_not_open_yet(pool: PgPool) {
    let rooms = common::test_rooms(RoomKey::random(), 10);
    let at = now();
    let join = |event_id: EventId| {
        let (pool, rooms) = (pool.clone(), rooms.clone());
        async move {
            let proof = common::proof(&rooms, event_id, at);
            waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), None, at).await
        }
    };
    let specs = [TicketSpec::new(10, 2, 2)];

    let draft = event_with_window(&pool, at - Duration::hours(1), None, "draft", &specs).await;
    let draft = EventId::from(draft.event_id);
    waiting_room::save(&pool, draft, &settings(60))
        .await
        .unwrap();
    assert!(matches!(
        join(draft).await,
        Err(stampede::error::AppError::NotFound)
    ));

    let off = EventId::from(published_event(&pool, &specs).await.event_id);
    waiting_room::save(&pool, off, &RoomSettings::default())
        .await
        .unwrap();
    assert!(matches!(
        join(off).await,
        Err(stampede::error::AppError::NotFound)
    ));

    // The pre-queue opens 15 minutes before a sale that opens in an hour.
    let early = event_with_window(&pool, at + Duration::hours(1), None, "published", &specs).await;
    let early = EventId::from(early.event_id);
    waiting_room::save(&pool, early, &settings(60))
        .await
        .unwrap();
    assert!(matches!(
        join(early).await,
        Err(stampede::error::AppError::Forbidden(_))
    ));

    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(entries, 0);
}

#[sqlx::test]
async fn joining_needs_a_fresh_solved_challenge_and_every_refusal_writes_nothing(pool: PgPool) {
    let key = RoomKey::random();
    let (app, fixture) = queued_app(&pool, &key).await;
    let event_id = fixture.event_id;
    let code = |(status, body): (StatusCode, Value)| {
        (
            status,
            body["error"]["code"].as_str().unwrap_or("").to_owned(),
        )
    };

    // Nothing, garbage, the bare challenge, a nonce that misses the zero bits.
    let refused = code(api_join(&app, event_id, None, None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_required".into()));
    let refused = code(api_join(&app, event_id, Some(json!({"proof": "nope"})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_invalid".into()));
    let challenge: Value = app
        .client
        .get(app.url(&format!("/api/v1/events/{event_id}/queue/challenge")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = challenge["challenge"].as_str().unwrap();
    let bits = u32::try_from(challenge["difficulty_bits"].as_u64().unwrap()).unwrap();
    assert_eq!(bits, common::TEST_PROOF_BITS);
    let refused = code(api_join(&app, event_id, Some(json!({"proof": token})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_invalid".into()));
    let wrong = (0..)
        .map(|n| format!("{token}.{n}"))
        .find(|p| waiting_room::leading_zero_bits(&Sha256::digest(p.as_bytes())) < bits)
        .unwrap();
    let refused = code(api_join(&app, event_id, Some(json!({"proof": wrong})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_invalid".into()));
    // Unknown fields and non-objects are refused too.
    let (status, _) = api_join(&app, event_id, Some(json!({"prooof": "x"})), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Another event's solution is not this one's.
    let other = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    waiting_room::save(&pool, EventId::from(other.event_id), &settings(60))
        .await
        .unwrap();
    let theirs = api_proof(&app.client, &app, other.event_id).await;
    let refused = code(api_join(&app, event_id, Some(json!({"proof": theirs})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_invalid".into()));

    // An expired one.
    let stale = waiting_room::solve(token, bits);
    app.clock.set(app.clock.now() + waiting_room::CHALLENGE_TTL);
    let refused = code(api_join(&app, event_id, Some(json!({"proof": stale})), None).await);
    assert_eq!(refused, (StatusCode::FORBIDDEN, "proof_expired".into()));
    assert_eq!(entry_count(&pool).await, 0, "no refusal wrote an entry");

    // A good one joins once; replayed (without the entry's token, as a
    // script would) it makes no second entry.
    let proof = api_proof(&app.client, &app, event_id).await;
    let (status, joined) = api_join(&app, event_id, Some(json!({"proof": proof})), None).await;
    assert_eq!(status, StatusCode::CREATED, "{joined}");
    for _ in 0..3 {
        let refused = code(api_join(&app, event_id, Some(json!({"proof": proof})), None).await);
        assert_eq!(refused, (StatusCode::CONFLICT, "proof_reused".into()));
    }
    assert_eq!(entry_count(&pool).await, 1);
    // The holder of the entry keeps it without solving again.
    let (status, again) = api_join(
        &app,
        event_id,
        None,
        Some(joined["token"].as_str().unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["entry_id"], joined["entry_id"]);

    // The form without a proof (JavaScript off): refused, and the page says why.
    let buyer = browser();
    let page = text(&buyer, app.url(&format!("/events/{event_id}"))).await;
    assert!(page.contains("<noscript>"), "{page}");
    assert!(page.contains("Joining this queue needs JavaScript"));
    assert!(page.contains("/static/proof-worker.js?v="));
    let csrf = common::csrf_from_page(&page);
    let refused = post(
        &buyer,
        app.url(&format!("/events/{event_id}/queue")),
        &[],
        &csrf,
    )
    .await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(refused.text().await.unwrap().contains("solved challenge"));
    assert_eq!(entry_count(&pool).await, 1);
    // The worker is served as a script from this site.
    let worker = app
        .client
        .get(app.url("/static/proof-worker.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(worker.status(), StatusCode::OK);
    assert!(
        worker.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
}

#[sqlx::test]
async fn simultaneous_joins_from_one_address_stay_within_its_cap(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    const CAP: u32 = 3;
    let rooms = common::test_rooms(RoomKey::random(), CAP);
    let at = now();
    // Many rounds, each a fresh address whose joins all start at once:
    // without a lock between the count and the insert, some round lets
    // more than CAP in.
    for round in 0..20_u8 {
        let ip = std::net::IpAddr::from([198, 51, 100, round]);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(16));
        let joins: Vec<_> = (0..16)
            .map(|_| {
                let (pool, rooms, barrier) = (pool.clone(), rooms.clone(), barrier.clone());
                let proof = common::proof(&rooms, event_id, at);
                tokio::spawn(async move {
                    barrier.wait().await;
                    waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), Some(ip), at)
                        .await
                })
            })
            .collect();
        let mut joined = 0;
        for join in joins {
            match join.await.unwrap() {
                Ok(_) => joined += 1,
                Err(stampede::error::AppError::TooManyEntries { max: CAP }) => {}
                Err(other) => panic!("{other:?}"),
            }
        }
        assert_eq!(joined, CAP, "round {round}: joins let in");
    }
    assert_eq!(entry_count(&pool).await, 20 * i64::from(CAP));
}

/// Issue 34: the waiting list of an event behind a waiting room is no way
/// round the room. A returned ticket goes to the list first, so joining it
/// needs the room's pass, as buying does; refusals write nothing.
#[sqlx::test]
async fn joining_a_waiting_list_behind_a_room_needs_a_pass(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(1, 1, 1)]).await;
    let event_id = EventId::from(fixture.event_id);
    let tt = fixture.ticket_type_id();
    // Sold out before the room is switched on, so that no pass is needed
    // to sell the seat.
    common::api_buy(
        &TestApp::spawn(pool.clone()).await,
        tt,
        1,
        "first@example.org",
    )
    .await;
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    let key = RoomKey::random();
    let clock = ManualClock::new(now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_list_cache_ttl(StdDuration::ZERO)
        .with_rooms(common::test_rooms(key.clone(), 10));
    let app = TestApp::spawn_state(pool.clone(), clock.clone(), state).await;
    let path = format!("/events/{event_id}/waiting-list");
    let join = |email: &'static str, pass: Option<String>| {
        let app = &app;
        let path = &path;
        async move {
            let mut cookies = common::forms::csrf_cookie();
            if let Some(pass) = pass {
                cookies.push_str(&format!(
                    "; stampede_pass_{}={pass}",
                    event_id.get().simple()
                ));
            }
            app.client
                .post(app.url(path))
                .header("content-type", "application/x-www-form-urlencoded")
                .header("cookie", cookies)
                .body(common::forms::form_body(&[
                    ("ticket_type_id", &tt.to_string()),
                    ("quantity", "1"),
                    ("email", email),
                ]))
                .send()
                .await
                .unwrap()
        }
    };
    let places = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM waitlist_entries")
            .fetch_one(&pool)
            .await
            .unwrap()
    };

    let no_pass = join("bot@example.org", None).await;
    assert_eq!(no_pass.status(), StatusCode::FORBIDDEN);
    let page = no_pass.text().await.unwrap();
    assert!(
        page.contains("value=\"bot@example.org\""),
        "the form comes back: {page}"
    );
    let forged = key_of_another_deployment_pass(event_id, clock.now());
    assert_eq!(
        join("bot@example.org", Some(forged)).await.status(),
        StatusCode::FORBIDDEN
    );
    let expired = key
        .pass(
            event_id,
            QueueEntryId::from(Uuid::new_v4()),
            clock.now() - Duration::seconds(1),
        )
        .to_string();
    assert_eq!(
        join("bot@example.org", Some(expired)).await.status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(places().await, 0);

    let pass = key
        .pass(
            event_id,
            QueueEntryId::from(Uuid::new_v4()),
            clock.now() + Duration::minutes(5),
        )
        .to_string();
    let joined = join("fan@example.org", Some(pass)).await;
    assert_eq!(joined.status(), StatusCode::OK);
    assert_eq!(places().await, 1);
}

/// A pass signed with a key this app does not have.
fn key_of_another_deployment_pass(event_id: EventId, now: OffsetDateTime) -> String {
    RoomKey::random()
        .pass(
            event_id,
            QueueEntryId::from(Uuid::new_v4()),
            now + Duration::minutes(5),
        )
        .to_string()
}

/// Joins are written in batches, one per event per instance at a time
/// (src/waiting_room/join_batch.rs): two instances' batches from one
/// address at once still keep to its cap (the address's lock is taken by
/// both, in key order), and a solved challenge sent twice at once makes one
/// entry, the other answered `proof_reused`, without failing the batch.
#[sqlx::test]
async fn batches_of_two_instances_at_once_keep_the_cap_and_a_replayed_proof_joins_once(
    pool: PgPool,
) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    const CAP: u32 = 4;
    let key = RoomKey::random();
    let instances = [
        common::test_rooms(key.clone(), CAP),
        common::test_rooms(key.clone(), CAP),
    ];
    let at = now();
    for round in 0..10_u8 {
        let ip = std::net::IpAddr::from([198, 51, 100, round]);
        let others = std::net::IpAddr::from([203, 0, 113, round]);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(24));
        // 8 joins from `ip` and 4 from `others` through each instance; one
        // of `others`' proofs is sent twice (once through each instance).
        let replayed = common::proof(&instances[0], event_id, at);
        let joins: Vec<_> = (0..24)
            .map(|n| {
                let rooms = instances[n % 2].clone();
                let (pool, barrier) = (pool.clone(), barrier.clone());
                let (client, proof) = match n {
                    0 | 1 => (others, replayed.clone()),
                    2 | 3 => (others, common::proof(&rooms, event_id, at)),
                    _ => (ip, common::proof(&rooms, event_id, at)),
                };
                tokio::spawn(async move {
                    barrier.wait().await;
                    let joined = waiting_room::join(
                        &pool,
                        &rooms,
                        event_id,
                        None,
                        Some(&proof),
                        Some(client),
                        at,
                    )
                    .await;
                    (client, joined)
                })
            })
            .collect();
        let (mut from_ip, mut from_others, mut reused) = (0, 0, 0);
        for join in joins {
            match join.await.unwrap() {
                (client, Ok(_)) if client == ip => from_ip += 1,
                (_, Ok(_)) => from_others += 1,
                (_, Err(stampede::error::AppError::TooManyEntries { max: CAP })) => {}
                (_, Err(stampede::error::AppError::ProofReused)) => reused += 1,
                (_, Err(other)) => panic!("{other:?}"),
            }
        }
        assert_eq!(from_ip, CAP, "round {round}: joins let in");
        assert_eq!((from_others, reused), (3, 1), "round {round}");
    }
    assert_eq!(entry_count(&pool).await, 10 * (i64::from(CAP) + 3));
}

/// The instance's cached room saves a read per join, but the batch reads
/// the room again under its row lock: an event unpublished (or a room
/// switched off) a moment ago, elsewhere, takes no entry, however fresh
/// the cache.
#[sqlx::test]
async fn a_room_closed_since_the_cached_read_takes_no_entry(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10);
    let at = now();
    let join = |rooms: &Rooms| {
        let proof = common::proof(rooms, event_id, at);
        let (pool, rooms) = (pool.clone(), rooms.clone());
        async move { waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), None, at).await }
    };
    join(&rooms).await.unwrap();
    for close in [
        "UPDATE events SET status = 'draft' WHERE id = $1",
        "UPDATE waiting_rooms SET enabled = false WHERE event_id = $1",
    ] {
        // Another instance's change: this one's cache still says open.
        sqlx::query(close)
            .bind(fixture.event_id)
            .execute(&pool)
            .await
            .unwrap();
        let refused = join(&rooms).await;
        assert!(
            matches!(refused, Err(stampede::error::AppError::NotFound)),
            "{close}: {refused:?}"
        );
        assert_eq!(entry_count(&pool).await, 1, "{close}");
        sqlx::query("UPDATE events SET status = 'published' WHERE id = $1")
            .bind(fixture.event_id)
            .execute(&pool)
            .await
            .unwrap();
    }
}

//! The admitter: one at a time, within the rate and the cap, replaced
//! when it dies; the dashboard's figures and its pause.

use super::*;

#[sqlx::test]
async fn two_admitters_at_once_admit_no_entry_twice_and_keep_to_the_rate(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(600))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);
    let t0 = now();
    entries(&pool, &rooms, event_id, 300, t0 - Duration::seconds(30)).await;
    sqlx::query("UPDATE waiting_rooms SET admit_clock = $2 WHERE event_id = $1")
        .bind(event_id.get())
        .bind(t0)
        .execute(&pool)
        .await
        .unwrap();

    // Two instances tick over the same ten seconds (600 a minute: 100).
    let admitter = |pool: PgPool| async move {
        let mut admitted = 0;
        for second in 1..=10 {
            if let Some(n) = waiting_room::tick(&pool, t0 + Duration::seconds(second))
                .await
                .unwrap()
            {
                admitted += n;
            }
        }
        admitted
    };
    let (a, b) = tokio::join!(
        tokio::spawn(admitter(pool.clone())),
        tokio::spawn(admitter(pool.clone()))
    );
    let last = waiting_room::tick(&pool, t0 + Duration::seconds(10))
        .await
        .unwrap()
        .unwrap();
    let claimed = a.unwrap() + b.unwrap() + last;
    let in_table = admitted(&pool, event_id).await;
    assert_eq!(claimed as i64, in_table, "no entry admitted twice");
    assert_eq!(in_table, 100, "ten seconds at 600 a minute");
    // In queue order.
    let first_hundred: Vec<Uuid> = queue_order(&pool, event_id.get())
        .await
        .into_iter()
        .take(100)
        .collect();
    let admitted_ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM queue_entries WHERE event_id = $1 AND admitted_at IS NOT NULL ORDER BY position, seq",
    )
    .bind(event_id.get())
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(admitted_ids, first_hundred);
}

#[sqlx::test]
async fn the_cap_bounds_active_passes_and_pause_stops_admission(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    let capped = RoomSettings {
        enabled: true,
        admit_per_minute: None,
        max_active: Some(3),
        ..RoomSettings::default()
    };
    waiting_room::save(&pool, event_id, &capped).await.unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);
    let t0 = now();
    entries(&pool, &rooms, event_id, 10, t0).await;
    assert_eq!(waiting_room::tick(&pool, t0).await.unwrap(), Some(3));
    assert_eq!(
        waiting_room::tick(&pool, t0 + Duration::seconds(1))
            .await
            .unwrap(),
        Some(0)
    );
    // Passes expire: room for three more.
    let later = t0 + Duration::minutes(11);
    waiting_room::save(
        &pool,
        event_id,
        &RoomSettings {
            paused: true,
            ..capped.clone()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        waiting_room::tick(&pool, later).await.unwrap(),
        Some(0),
        "paused"
    );
    waiting_room::save(&pool, event_id, &capped).await.unwrap();
    assert_eq!(waiting_room::tick(&pool, later).await.unwrap(), Some(3));
    assert_eq!(admitted(&pool, event_id).await, 6);
}

#[sqlx::test]
async fn a_crashed_admitter_is_replaced(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(600))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);
    let t0 = now();
    entries(&pool, &rooms, event_id, 20, t0 - Duration::seconds(30)).await;

    // An admitter that took the lock and then hangs, in a connection of its own.
    let options = pool.connect_options();
    let mut stuck = PgConnection::connect_with(&options).await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut stuck)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut stuck).await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(waiting_room::ADMITTER_LOCK)
        .execute(&mut stuck)
        .await
        .unwrap();
    assert_eq!(
        waiting_room::tick(&pool, t0).await.unwrap(),
        None,
        "another admitter stands by"
    );
    assert_eq!(admitted(&pool, event_id).await, 0);

    // It dies (its backend is killed, as when its host goes away).
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(killed);
    drop(stuck);
    // The next tick of the other instance takes over (the lock goes with
    // the connection; terminating waits for nothing, so poll a few times).
    let mut took_over = None;
    for _ in 0..50 {
        took_over = waiting_room::tick(&pool, t0).await.unwrap();
        if took_over.is_some() {
            break;
        }
        tokio::time::sleep(StdDuration::from_millis(100)).await;
    }
    assert!(took_over.is_some_and(|n| n > 0), "{took_over:?}");
    assert!(admitted(&pool, event_id).await > 0);
}

#[sqlx::test]
async fn the_dashboard_shows_the_rooms_figures_and_pauses_and_resumes_admission(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("dash@example.org").await;
    let fixture =
        common::organizer::owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = EventId::from(fixture.event_id);
    let dashboard = format!("/organizer/events/{event_id}");
    let page = org.get(&dashboard).await.text().await.unwrap();
    assert!(!page.contains("id=\"waiting-room\""), "no room, no panel");

    let capped = RoomSettings {
        max_active: Some(2),
        ..settings(60)
    };
    waiting_room::save(&pool, event_id, &capped).await.unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 100);
    let at = app.clock.now();
    entries(&pool, &rooms, event_id, 5, at).await;
    assert_eq!(waiting_room::tick(&pool, at).await.unwrap(), Some(2));

    let page = org.get(&dashboard).await.text().await.unwrap();
    let figure = |name: &str| {
        let marker = format!("data-figure=\"{name}\">");
        let start = page
            .find(&marker)
            .unwrap_or_else(|| panic!("{name} in {page}"))
            + marker.len();
        page[start..].split('<').next().unwrap().to_owned()
    };
    assert_eq!(figure("waiting"), "3");
    assert_eq!(figure("admitted_last_minute"), "2");
    assert_eq!(figure("admitted"), "2");
    assert_eq!(figure("active_passes"), "2");
    assert_eq!(figure("estimated_secs_to_clear"), "3 s");
    assert_eq!(figure("state"), "admitting");
    assert!(page.contains(&format!(
        "data-live=\"/organizer/events/{event_id}/waiting-room.json\""
    )));
    // The live figures' JSON is the organizer API's, behind the session.
    let live: Value = org
        .get(&format!("/organizer/events/{event_id}/waiting-room.json"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(live["waiting"], 3);
    assert_eq!(live["admitted_last_minute"], 2);
    assert_eq!(live["estimated_secs_to_clear"], 3);

    // Pause from the dashboard (the form carries the CSRF token).
    assert!(page.contains("Pause admission"));
    let path = format!("/organizer/events/{event_id}/waiting-room/admission");
    let paused = org.post_form(&path, &[("paused", "true")]).await;
    assert_eq!(paused.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        common::location(&paused),
        format!("{dashboard}#waiting-room")
    );
    let room = waiting_room::load(&pool, event_id).await.unwrap().unwrap();
    assert!(room.settings.paused);
    assert_eq!(
        waiting_room::tick(&pool, at + Duration::seconds(9))
            .await
            .unwrap(),
        Some(0)
    );
    let page = org.get(&dashboard).await.text().await.unwrap();
    assert!(page.contains("Resume admission"));
    assert_eq!(figure_in(&page, "state"), "paused");

    // Without the CSRF token, or a bad value, or another organizer: refused,
    // nothing changed.
    let forged = org
        .client
        .post(org.url(&path))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("paused=false")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let bad = org.post_form(&path, &[("paused", "maybe")]).await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let other = app.organizer("other-dash@example.org").await;
    let theirs = other.post_form(&path, &[("paused", "false")]).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    assert!(
        waiting_room::load(&pool, event_id)
            .await
            .unwrap()
            .unwrap()
            .settings
            .paused
    );

    let resumed = org.post_form(&path, &[("paused", "false")]).await;
    assert_eq!(resumed.status(), StatusCode::SEE_OTHER);
    assert!(
        !waiting_room::load(&pool, event_id)
            .await
            .unwrap()
            .unwrap()
            .settings
            .paused
    );
}

//! A browser through the pages, and the organizer's room form.

use super::*;

#[sqlx::test]
async fn a_browser_joins_waits_is_admitted_and_buys_once(pool: PgPool) {
    let key = RoomKey::random();
    let (app, fixture) = queued_app(&pool, &key).await;
    let event_id = fixture.event_id;
    let tt = fixture.ticket_type_id().to_string();
    let buyer = browser();
    let page = text(&buyer, app.url(&format!("/events/{event_id}"))).await;
    let csrf = common::csrf_from_page(&page);
    assert!(!page.contains(&tt));

    // Joining, twice (a second tab, with its own solved challenge): one place.
    for _ in 0..2 {
        let proof = api_proof(&buyer, &app, event_id).await;
        let joined = post(
            &buyer,
            app.url(&format!("/events/{event_id}/queue")),
            &[("proof", &proof)],
            &csrf,
        )
        .await;
        assert_eq!(joined.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            common::location(&joined),
            format!("/events/{event_id}/queue")
        );
    }
    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(entries, 1);

    let waiting = text(&buyer, app.url(&format!("/events/{event_id}/queue"))).await;
    assert!(waiting.contains("You are number"), "{waiting}");
    assert!(waiting.contains("http-equiv=\"refresh\""));

    // Admitted: the page hands over the pass, and the event page its form.
    assert_eq!(
        waiting_room::tick(&pool, app.clock.now()).await.unwrap(),
        Some(1)
    );
    let admitted = text(&buyer, app.url(&format!("/events/{event_id}/queue"))).await;
    assert!(admitted.contains("It is your turn"), "{admitted}");
    assert!(!admitted.contains("http-equiv=\"refresh\""));
    let page = text(&buyer, app.url(&format!("/events/{event_id}"))).await;
    assert!(
        page.contains(&tt),
        "the buy form shows to the admitted buyer"
    );

    let buy = |key: String| {
        let buyer = buyer.clone();
        let url = app.url(&format!("/events/{event_id}/orders"));
        let tt = tt.clone();
        let csrf = csrf.clone();
        async move {
            post(
                &buyer,
                url,
                &[
                    ("ticket_type_id", &tt),
                    ("quantity", "1"),
                    ("email", "fan@example.org"),
                    ("idempotency_key", &key),
                ],
                &csrf,
            )
            .await
        }
    };
    let bought = buy(Uuid::new_v4().to_string()).await;
    assert_eq!(bought.status(), StatusCode::SEE_OTHER);
    assert!(common::location(&bought).starts_with("/orders/"));
    let again = buy(Uuid::new_v4().to_string()).await;
    assert_eq!(again.status(), StatusCode::FORBIDDEN);
    assert!(again.text().await.unwrap().contains("already used"));
    assert_eq!(order_count(&pool).await, 1);
    // Another browser, without a pass, sees no form.
    let stranger = text(&browser(), app.url(&format!("/events/{event_id}"))).await;
    assert!(!stranger.contains(&tt));
    // The first join after the opening shuffled the (empty) pre-queue:
    // the seed is public.
    let room = waiting_room::load(&pool, EventId::from(event_id))
        .await
        .unwrap()
        .unwrap();
    let seed = room.revealed_seed_hex().unwrap();
    assert!(stranger.contains(&seed), "the event page reveals the seed");
    assert!(stranger.contains(&room.commitment_hex()));
    let published: Value = buyer
        .get(app.url(&format!("/events/{event_id}/queue/prequeue.json")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(published["seed"], seed.as_str());
    // This buyer came after the opening: queued by arrival, not in the pre-queue.
    assert_eq!(published["entries"], json!([]));
}

#[sqlx::test]
async fn the_organizer_sets_the_room_on_the_edit_page(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("room@example.org").await;
    let fixture =
        common::organizer::owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let event_id = fixture.event_id;
    let edit = org
        .get(&format!("/organizer/events/{event_id}/edit"))
        .await
        .text()
        .await
        .unwrap();
    assert!(edit.contains("Waiting room on"));

    // Bought without a room: this instance remembers "no room" for the type...
    let tt = fixture.ticket_type_id();
    let (status, body) = order(&app, tt, &Uuid::new_v4().to_string(), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let path = format!("/organizer/events/{event_id}/waiting-room");
    // A bad field comes back named, filled in; nothing saved.
    let refused = org
        .post_form(
            &path,
            &[
                ("enabled", "on"),
                ("prequeue_minutes", "15"),
                ("admit_per_minute", "0"),
                ("pass_minutes", "10"),
            ],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = refused.text().await.unwrap();
    assert!(page.contains("buyers per minute"), "{page}");
    assert!(
        waiting_room::load(&pool, EventId::from(event_id))
            .await
            .unwrap()
            .is_none()
    );

    let saved = org
        .post_form(
            &path,
            &[
                ("enabled", "on"),
                ("prequeue_minutes", "20"),
                ("admit_per_minute", "120"),
                ("max_active", ""),
                ("pass_minutes", "5"),
            ],
        )
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    // ...and forgets it when the room is switched on here: no pass, no sale.
    let (status, body) = order(&app, tt, &Uuid::new_v4().to_string(), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "pass_required");
    assert_eq!(order_count(&pool).await, 1);
    let room = waiting_room::load(&pool, EventId::from(event_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        room.settings,
        RoomSettings {
            enabled: true,
            prequeue_minutes: 20,
            admit_per_minute: Some(120),
            max_active: None,
            pass_minutes: 5,
            paused: false,
        }
    );
    // The edit page then shows the room's four figures, and links to the
    // dashboard's live panel.
    let edit = org
        .get(&format!("/organizer/events/{event_id}/edit"))
        .await
        .text()
        .await
        .unwrap();
    for figure in [
        "In the queue: <strong>0</strong>",
        "admitted in the last minute: <strong>0</strong>",
        "admitted so far: <strong>0</strong>",
        "live passes: <strong>0</strong>",
    ] {
        assert!(edit.contains(figure), "{figure} missing: {edit}");
    }
    assert!(edit.contains(&format!(
        "href=\"/organizer/events/{event_id}#waiting-room\""
    )));

    // Another organizer's event does not exist for them; a post without
    // the CSRF field is refused.
    let other = app.organizer("other@example.org").await;
    let theirs = other
        .post_form(
            &path,
            &[
                ("enabled", "on"),
                ("prequeue_minutes", "1"),
                ("admit_per_minute", "1"),
                ("pass_minutes", "1"),
            ],
        )
        .await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    let forged = org
        .client
        .post(org.url(&path))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("enabled=off&prequeue_minutes=1&admit_per_minute=1&pass_minutes=1")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let room = waiting_room::load(&pool, EventId::from(event_id))
        .await
        .unwrap()
        .unwrap();
    assert!(room.settings.enabled && room.settings.prequeue_minutes == 20);
}

//! Buying a queued event: a valid, unspent pass, or nothing is written.

use super::*;

#[sqlx::test]
async fn buying_a_queued_event_needs_a_valid_unspent_pass_and_refusals_write_nothing(pool: PgPool) {
    let key = RoomKey::random();
    let (app, fixture) = queued_app(&pool, &key).await;
    let event_id = EventId::from(fixture.event_id);
    let tt = fixture.ticket_type_id();
    let now = app.clock.now();

    // Ticket type ids are hidden from the public API until admitted.
    let event: Value = app
        .client
        .get(app.url(&format!("/api/v1/events/{event_id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(event["ticket_types"][0].get("id").is_none(), "{event}");
    let page = app
        .client
        .get(app.url(&format!("/events/{event_id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains(&tt.to_string()),
        "the page shows no ticket type id"
    );
    assert!(page.contains("Join the queue"));

    // Join through the API, get admitted, fetch the pass.
    let proof = api_proof(&app.client, &app, event_id.get()).await;
    let joined = app
        .client
        .post(app.url(&format!("/api/v1/events/{event_id}/queue")))
        .json(&json!({ "proof": proof }))
        .send()
        .await
        .unwrap();
    assert_eq!(joined.status(), StatusCode::CREATED);
    let token = joined.headers()["stampede-queue-entry"]
        .to_str()
        .unwrap()
        .to_owned();
    let joined: Value = joined.json().await.unwrap();
    assert_eq!(joined["token"], token.as_str());
    assert_eq!(joined["state"], "waiting");
    assert_eq!(joined["place"], 1);
    assert_eq!(waiting_room::tick(&pool, now).await.unwrap(), Some(1));
    let position: Value = app
        .client
        .get(app.url(&format!("/api/v1/events/{event_id}/queue")))
        .header("stampede-queue-entry", &token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(position["state"], "admitted", "{position}");
    let pass = position["pass"].as_str().unwrap().to_owned();
    let entry =
        QueueEntryId::from(Uuid::parse_str(position["entry_id"].as_str().unwrap()).unwrap());

    // With the pass, the ids show.
    let event: Value = app
        .client
        .get(app.url(&format!("/api/v1/events/{event_id}?pass={pass}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(event["ticket_types"][0]["id"], tt.to_string());

    let other = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let refusals = [
        (None, "pass_required"),
        (
            Some(
                key.pass(event_id, entry, now - Duration::seconds(1))
                    .to_string(),
            ),
            "pass_expired",
        ),
        (
            Some(
                RoomKey::random()
                    .pass(event_id, entry, now + Duration::minutes(5))
                    .to_string(),
            ),
            "pass_invalid",
        ),
        (
            Some(
                key.pass(
                    EventId::from(other.event_id),
                    entry,
                    now + Duration::minutes(5),
                )
                .to_string(),
            ),
            "pass_invalid",
        ),
        (Some(format!("{pass}0")), "pass_invalid"),
    ];
    for (presented, code) in refusals {
        let (status, body) =
            order(&app, tt, &Uuid::new_v4().to_string(), presented.as_deref()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert_eq!(
            written(&pool).await,
            (0, 0, 0, 0),
            "a refusal ({code}) wrote nothing"
        );
    }
    // The buy form without a pass cookie is refused the same way.
    let form = common::forms::form_body(&[
        ("ticket_type_id", &tt.to_string()),
        ("quantity", "1"),
        ("email", "fan@example.org"),
        ("idempotency_key", &Uuid::new_v4().to_string()),
    ]);
    let refused = app
        .client
        .post(app.url(&format!("/events/{event_id}/orders")))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", common::csrf_cookie())
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(written(&pool).await, (0, 0, 0, 0));

    // The pass buys once; its own retry replays; another purchase is refused.
    let bought_key = Uuid::new_v4().to_string();
    let (status, body) = order(&app, tt, &bought_key, Some(&pass)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _) = order(&app, tt, &bought_key, Some(&pass)).await;
    assert_eq!(status, StatusCode::OK);
    let after_sale = written(&pool).await;
    assert_eq!(after_sale.0, 1);
    let (status, body) = order(&app, tt, &Uuid::new_v4().to_string(), Some(&pass)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "pass_spent");
    assert_eq!(
        written(&pool).await,
        after_sale,
        "a spent pass wrote nothing"
    );
    let spent: Option<Uuid> = sqlx::query_scalar("SELECT queue_entry_id FROM orders")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        spent,
        Some(entry.get()),
        "the order records the entry it spent"
    );
    common::assert_invariants(&pool).await;
}

#[sqlx::test]
async fn the_unique_entry_on_orders_is_the_last_word_on_a_spent_pass(pool: PgPool) {
    // Past the pre-check (two purchases racing with one pass): the sale's
    // own transaction refuses the second.
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let entry = QueueEntryId::from(Uuid::new_v4());
    let request = |email: &str| {
        let mut request = common::purchase::purchase_request(fixture.ticket_type_id(), 1, email);
        request.queue_entry = Some(entry);
        request
    };
    stampede::sale::purchase(&pool, now(), &request("a@example.org"))
        .await
        .unwrap();
    let before = written(&pool).await;
    let second = stampede::sale::purchase(&pool, now(), &request("b@example.org")).await;
    assert!(
        matches!(second, Err(stampede::error::AppError::PassSpent)),
        "{second:?}"
    );
    assert_eq!(written(&pool).await, before);
}

/// Without a room there is no pass to spend: an entry the caller names is
/// dropped before the sale (it cannot reserve an entry of another event's
/// room), so the order records none.
#[sqlx::test]
async fn an_entry_named_for_an_event_without_a_room_is_not_recorded(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let sales = Sales::new(pool.clone(), Strategy::Batch, EngineSettings::default());
    let mut request =
        common::purchase::purchase_request(fixture.ticket_type_id(), 1, "a@example.org");
    request.queue_entry = Some(QueueEntryId::from(Uuid::new_v4()));
    let created = sales.purchase(now(), &request).await;
    assert!(
        matches!(created, Ok(Purchase::Created { .. })),
        "{created:?}"
    );
    let recorded: Option<Uuid> = sqlx::query_scalar("SELECT queue_entry_id FROM orders")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        recorded, None,
        "an entry recorded for an event with no room"
    );
}

//! Events through the API: create, refuse, list and show.

use super::*;

#[sqlx::test]
async fn api_creates_an_event_with_its_ticket_types(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let resp = api_create_event(&org, &api_event("API concert", Some("published"))).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    let id = Uuid::parse_str(body["id"].as_str().unwrap()).unwrap();
    assert_eq!(body["status"], "published");
    assert_eq!(body["title"], "API concert");
    assert_eq!(body["venue"], "API hall");
    assert_eq!(body["starts_at"], "2030-03-01T19:30:00Z");
    let tts = body["ticket_types"].as_array().unwrap();
    assert_eq!(tts.len(), 2);
    assert_eq!(tts[0]["name"], "Standing");
    assert_eq!(tts[0]["capacity"], 100);
    assert_eq!(tts[0]["remaining"], 100);
    assert_eq!(tts[0]["price_minor"], 2500);
    assert_eq!(tts[0]["max_per_order"], 4);
    assert_eq!(tts[0]["max_per_buyer"], 6);
    assert_eq!(tts[1]["name"], "Seated");
    assert_eq!(tts[1]["currency"], "EUR");
    assert_eq!(tts[1]["capacity"], 50);
    assert_eq!(tts[1]["remaining"], 50);
    assert_eq!(tts[1]["max_per_order"], 10);
    assert_eq!(tts[1]["max_per_buyer"], 10);

    let in_db: Vec<(Uuid, i32, i32)> = sqlx::query_as(
        "SELECT id, capacity, remaining FROM ticket_types WHERE event_id = $1 ORDER BY position",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let returned: Vec<(Uuid, i32, i32)> = tts
        .iter()
        .map(|t| {
            (
                Uuid::parse_str(t["id"].as_str().unwrap()).unwrap(),
                t["capacity"].as_i64().unwrap() as i32,
                t["remaining"].as_i64().unwrap() as i32,
            )
        })
        .collect();
    assert_eq!(in_db, returned);
    assert_eq!(event_status(&pool, id).await, "published");
    // The event belongs to the organizer whose token created it.
    let owner: Option<Uuid> =
        scalar(&pool, "SELECT organizer_id FROM events WHERE id = $1", id).await;
    assert_eq!(owner, Some(org.id));
}

#[sqlx::test]
async fn api_event_creation_rejects_invalid_input_and_writes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let mut missing_venue = api_event("No venue", None);
    missing_venue.as_object_mut().unwrap().remove("venue");
    let mut negative = api_event("Negative", None);
    negative["ticket_types"][1]["capacity"] = json!(-5);
    let mut no_types = api_event("Empty", None);
    no_types["ticket_types"] = json!([]);
    let mut bad_date = api_event("Bad date", None);
    bad_date["starts_at"] = json!("next friday");
    let mut unknown_field = api_event("Extra", None);
    unknown_field["colour"] = json!("red");
    let bad_status = api_event("Status", Some("live"));

    let cases = [
        (missing_venue, "venue"),
        (negative, "ticket_types[1].capacity"),
        (no_types, "ticket_types"),
        (bad_date, "starts_at"),
        (bad_status, "status"),
    ];
    for (body, field) in cases {
        let resp = api_create_event(&org, &body).await;
        assert_invalid(resp, field).await;
    }
    let resp = api_create_event(&org, &unknown_field).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["field"], "colour", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("colour")),
        "the refusal names the unknown field: {body}"
    );
    assert_eq!(event_count(&pool).await, 0);
    assert_eq!(ticket_type_count(&pool).await, 0);
}

#[sqlx::test]
async fn api_lists_and_shows_published_events_only(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api@example.org").await;
    let published: Value = api_create_event(&org, &api_event("Public", Some("published")))
        .await
        .json()
        .await
        .unwrap();
    let draft: Value = api_create_event(&org, &api_event("Hidden", None))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(draft["status"], "draft");
    let published_id = published["id"].as_str().unwrap();
    let draft_id = draft["id"].as_str().unwrap();
    let standing = Uuid::parse_str(published["ticket_types"][0]["id"].as_str().unwrap()).unwrap();
    api_buy(&app, standing, 3, "ada@example.org").await;

    let resp = get(&app, "/api/v1/events").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let list: Value = resp.json().await.unwrap();
    let events = list["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{list}");
    assert_eq!(events[0]["id"], published_id);
    assert_eq!(events[0]["status"], "published");
    assert_eq!(events[0]["ticket_types"][0]["capacity"], 100);
    assert_eq!(events[0]["ticket_types"][0]["remaining"], 97);
    assert_eq!(events[0]["ticket_types"][1]["remaining"], 50);

    let resp = get(&app, &format!("/api/v1/events/{published_id}")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let one: Value = resp.json().await.unwrap();
    assert_eq!(one["id"], published_id);
    assert_eq!(one["title"], "Public");
    assert_eq!(one["ticket_types"][0]["id"], standing.to_string());
    assert_eq!(one["ticket_types"][0]["capacity"], 100);
    assert_eq!(one["ticket_types"][0]["remaining"], 97);

    for path in [
        format!("/api/v1/events/{draft_id}"),
        format!("/api/v1/events/{}", Uuid::new_v4()),
        "/api/v1/events/garbage".to_owned(),
    ] {
        let resp = get(&app, &path).await;
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    }
}

//! Each event in its own time: the form takes local times in the event's
//! zone, refuses the ones the zone skips or repeats, and the pages and the
//! API show the zone.

use super::*;

async fn stored_times(pool: &PgPool, id: Uuid) -> (OffsetDateTime, OffsetDateTime, String) {
    sqlx::query_as("SELECT starts_at, sale_opens_at, time_zone FROM events WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn local_times_are_typed_and_shown_in_the_event_zone(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let new = org.get("/organizer/events/new").await.text().await.unwrap();
    // The deployment's default zone (UTC here) is filled in, and every
    // zone is offered.
    assert!(
        new.contains(r#"name="time_zone""#) && new.contains(r#"value="UTC""#),
        "{new}"
    );
    assert!(
        new.contains(r#"<option value="Australia/Sydney">"#),
        "{new}"
    );

    let fields = with(
        &with(
            &new_event_form("Berlin night"),
            "time_zone",
            "europe/berlin",
        ),
        "starts_at",
        "2030-07-10T19:30",
    );
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let id = Uuid::parse_str(location(&resp).strip_prefix("/organizer/events/").unwrap()).unwrap();
    let (starts_at, opens_at, zone) = stored_times(&pool, id).await;
    assert_eq!(zone, "Europe/Berlin");
    // 19:30 in Berlin's summer (CEST, UTC+2) is 17:30 UTC; 10:00 in its
    // winter (CET, UTC+1) is 09:00 UTC.
    assert_eq!(starts_at, time::macros::datetime!(2030-07-10 17:30 UTC));
    assert_eq!(opens_at, time::macros::datetime!(2020-01-01 09:00 UTC));

    let page = app
        .client
        .get(app.url(&format!("/events/{id}")))
        .send()
        .await
        .unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("Wed 10 Jul 2030, 19:30 CEST"), "{page}");
    assert!(
        page.contains(r#"datetime="2030-07-10T17:30:00Z" data-zone="Europe/Berlin""#),
        "{page}"
    );
    assert!(
        !page.contains(" UTC<"),
        "an unlabeled or UTC time on a Berlin page: {page}"
    );
    let edit = org
        .get(&format!("/organizer/events/{id}/edit"))
        .await
        .text()
        .await
        .unwrap();
    assert!(edit.contains(r#"value="2030-07-10T19:30""#), "{edit}");
    assert!(edit.contains(r#"value="Europe/Berlin""#), "{edit}");

    // Saving the edit form as shown moves nothing.
    let resp = org
        .post_form(
            &format!("/organizer/events/{id}/edit"),
            &borrowed(&with(&fields, "title", "Berlin night, renamed")),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(stored_times(&pool, id).await.0, starts_at);

    // The API keeps instants and names the zone.
    let body: Value = app
        .client
        .get(app.url(&format!("/api/v1/events/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["time_zone"], "Europe/Berlin");
    assert_eq!(body["starts_at"], "2030-07-10T17:30:00Z");
}

#[sqlx::test]
async fn a_local_time_the_clocks_skip_or_repeat_is_refused_and_nothing_is_written(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let cases = [
        // Berlin, 28 Mar 2027: 02:00 becomes 03:00.
        ("Europe/Berlin", "2027-03-28T02:30", "does not exist"),
        // Berlin, 31 Oct 2027: 03:00 becomes 02:00 again.
        ("Europe/Berlin", "2027-10-31T02:30", "happens twice"),
        // New York, 7 Nov 2027: 01:00–02:00 twice.
        ("America/New_York", "2027-11-07T01:30", "happens twice"),
        // Sydney, southern hemisphere: forward on 3 Oct, back on 4 Apr 2027.
        ("Australia/Sydney", "2027-10-03T02:30", "does not exist"),
        ("Australia/Sydney", "2027-04-04T02:30", "happens twice"),
    ];
    for (zone, starts_at, why) in cases {
        let fields = with(
            &with(&new_event_form("Night of the change"), "time_zone", zone),
            "starts_at",
            starts_at,
        );
        let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{zone} {starts_at}"
        );
        let page = resp.text().await.unwrap();
        assert!(
            page.contains(why) && page.contains(zone),
            "{zone} {starts_at}: {page}"
        );
        assert!(
            page.contains(r#"id="starts_at""#) && page.contains("aria-invalid=\"true\""),
            "{page}"
        );
        // The form comes back as typed.
        assert!(page.contains(&format!(r#"value="{starts_at}""#)), "{page}");
        assert!(page.contains("Night of the change"), "{page}");
    }
    // The sale opening is checked the same way.
    let fields = with(
        &with(
            &new_event_form("Opening in the gap"),
            "time_zone",
            "Europe/Berlin",
        ),
        "sale_opens_at",
        "2027-03-28T02:15",
    );
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let fields = with(&new_event_form("Nowhere"), "time_zone", "Europe/Atlantis");
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(resp.text().await.unwrap().contains("Europe/Atlantis"));
    assert_eq!(event_count(&pool).await, 0);

    // Through the API: a local time without an offset is read in the zone,
    // with the same refusal; an instant with its offset is taken as it is.
    let body = |starts_at: &str| {
        json!({
            "title": "API night", "venue": "Hall", "time_zone": "America/New_York",
            "starts_at": starts_at, "sale_opens_at": "2027-01-01T10:00:00Z", "payment": "offline",
            "ticket_types": [{"name": "Standing", "price_minor": 0, "currency": "USD", "capacity": 5}],
        })
    };
    assert_invalid(
        api_create_event(&org, &body("2027-03-14T02:30")).await,
        "starts_at",
    )
    .await;
    let bad_zone = json!({"time_zone": "Mars/Base", "title": "x", "venue": "y",
        "starts_at": "2027-05-01T20:00", "sale_opens_at": "2027-01-01T10:00:00Z",
        "ticket_types": [{"name": "S", "price_minor": 0, "currency": "USD", "capacity": 5}]});
    assert_invalid(api_create_event(&org, &bad_zone).await, "time_zone").await;
    assert_eq!(event_count(&pool).await, 0);
    let resp = api_create_event(&org, &body("2027-05-01T20:00")).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["time_zone"], "America/New_York");
    // 20:00 EDT (UTC-4).
    assert_eq!(created["starts_at"], "2027-05-02T00:00:00Z");
}

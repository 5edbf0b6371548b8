//! Editing an event: the filled-in form, capacities, refusals, status,
//! times kept as they were.

use super::*;

#[sqlx::test]
async fn organizer_edit_page_is_filled_in_with_the_event(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let resp = org
        .get(&format!("/organizer/events/{}/edit", fixture.event_id))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    // The form posts to the route that saves it (POST .../edit).
    assert!(
        body.contains(&format!(
            "action=\"/organizer/events/{}/edit\"",
            fixture.event_id
        )),
        "the edit form does not post to /organizer/events/{{id}}/edit: {body}"
    );
    assert!(
        body.contains(&format!(
            "type=\"hidden\" name=\"tt_id_0\" value=\"{}\"",
            fixture.ticket_type_id()
        )),
        "{body}"
    );
    assert!(body.contains("value=\"Test concert\""), "{body}");
    assert!(
        body.contains("name=\"tt_capacity_0\" type=\"number\" min=\"0\" value=\"10\""),
        "{body}"
    );
    assert!(
        body.contains("name=\"tt_price_0\" inputmode=\"decimal\" value=\"25.00\""),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "action=\"/organizer/events/{}/unpublish\"",
            fixture.event_id
        )),
        "{body}"
    );

    for path in [
        format!("/organizer/events/{}/edit", Uuid::new_v4()),
        "/organizer/events/zzz/edit".to_owned(),
        format!("/organizer/events/{}", Uuid::new_v4()),
        "/organizer/events/zzz".to_owned(),
    ] {
        assert_eq!(
            org.get(&path).await.status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}

#[sqlx::test]
async fn organizer_raising_capacity_raises_remaining_by_the_same_amount(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let tt = fixture.ticket_type_id();
    api_buy(&app, tt, 3, "ada@example.org").await;
    assert_eq!(capacity_and_remaining(&pool, tt).await, (10, 7));
    let edit = format!("/organizer/events/{}/edit", fixture.event_id);

    let fields = edit_form(tt, "Test concert, bigger", "15");
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        location(&resp),
        format!("/organizer/events/{}", fixture.event_id)
    );
    assert_eq!(capacity_and_remaining(&pool, tt).await, (15, 12));
    assert_eq!(
        event_title(&pool, fixture.event_id).await,
        "Test concert, bigger"
    );
    assert_eq!(ticket_type_count(&pool).await, 1);
    assert_invariants(&pool).await;

    // Adding a row on edit adds a ticket type; the first keeps its sales.
    let mut fields = edit_form(tt, "Test concert, bigger", "15");
    fields.extend(owned_fields(&[
        ("tt_name_1", "Balcony"),
        ("tt_price_1", "40"),
        ("tt_currency_1", "EUR"),
        ("tt_capacity_1", "30"),
        ("tt_max_per_order_1", ""),
        ("tt_max_per_buyer_1", ""),
    ]));
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let balcony: (i64, i32, i32) = sqlx::query_as(
        "SELECT price_minor, capacity, remaining FROM ticket_types WHERE event_id = $1 AND name = 'Balcony'",
    )
    .bind(fixture.event_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(balcony, (4000, 30, 30));
    assert_eq!(capacity_and_remaining(&pool, tt).await, (15, 12));
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn organizer_cannot_lower_capacity_below_tickets_sold(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let tt = fixture.ticket_type_id();
    api_buy(&app, tt, 3, "ada@example.org").await;
    let edit = format!("/organizer/events/{}/edit", fixture.event_id);

    let fields = edit_form(tt, "Renamed while failing", "2");
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains("3 tickets of &quot;General admission 0&quot; are already sold; the capacity cannot go below that."),
        "{body}"
    );
    assert!(body.contains("value=\"Renamed while failing\""), "{body}");
    assert!(body.contains("value=\"2\""), "{body}");
    // Nothing changed, not even the title sent along with the capacity.
    assert_eq!(capacity_and_remaining(&pool, tt).await, (10, 7));
    assert_eq!(event_title(&pool, fixture.event_id).await, "Test concert");

    // Exactly the number sold is allowed: nothing left, nothing oversold.
    let fields = edit_form(tt, "Test concert", "3");
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(capacity_and_remaining(&pool, tt).await, (3, 0));
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn organizer_edit_with_invalid_input_or_a_foreign_ticket_type_changes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let other = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let tt = fixture.ticket_type_id();
    let path = format!("/organizer/events/{}/edit", fixture.event_id);

    let fields = with(&edit_form(tt, "Renamed", "10"), "starts_at", "soon");
    let resp = org.post_form(&path, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(resp.text().await.unwrap().contains("value=\"Renamed\""));

    // A ticket type of another event (even one of the same organizer's)
    // cannot be edited through this one.
    let fields = edit_form(other.ticket_type_id(), "Renamed", "99");
    let resp = org.post_form(&path, &borrowed(&fields)).await;
    assert!(resp.status().is_client_error(), "{}", resp.status());
    assert_eq!(
        capacity_and_remaining(&pool, other.ticket_type_id()).await,
        (10, 10)
    );

    let fields = with(&edit_form(tt, "Renamed", "10"), "tt_id_0", "not-an-id");
    let resp = org.post_form(&path, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);

    let fields = edit_form(tt, "Renamed", "10");
    let resp = org
        .post_form(
            &format!("/organizer/events/{}/edit", Uuid::new_v4()),
            &borrowed(&fields),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    assert_eq!(event_title(&pool, fixture.event_id).await, "Test concert");
    assert_eq!(event_title(&pool, other.event_id).await, "Test concert");
    assert_eq!(capacity_and_remaining(&pool, tt).await, (10, 10));
    assert_eq!(ticket_type_count(&pool).await, 2);
}

#[sqlx::test]
async fn organizer_publish_and_unpublish_change_the_status(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let opened = opened();
    let fixture = owned_event(&org, opened, "draft", &[TicketSpec::new(10, 4, 4)]).await;
    let page = format!("/organizer/events/{}", fixture.event_id);
    let edit = format!("{page}/edit");

    let body = org.get(&edit).await.text().await.unwrap();
    assert!(
        body.contains(&format!("action=\"{page}/publish\"")),
        "{body}"
    );
    assert_eq!(
        get(&app, &format!("/events/{}", fixture.event_id))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );

    let resp = org.post_form(&format!("{page}/publish"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), page);
    assert_eq!(event_status(&pool, fixture.event_id).await, "published");
    assert_eq!(
        get(&app, &format!("/events/{}", fixture.event_id))
            .await
            .status(),
        StatusCode::OK
    );
    let body = org.get(&edit).await.text().await.unwrap();
    assert!(
        body.contains(&format!("action=\"{page}/unpublish\"")),
        "{body}"
    );

    let resp = org.post_form(&format!("{page}/unpublish"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), page);
    assert_eq!(event_status(&pool, fixture.event_id).await, "draft");
    assert_eq!(
        get(&app, &format!("/events/{}", fixture.event_id))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    let listed: Value = get(&app, "/api/v1/events").await.json().await.unwrap();
    assert_eq!(listed["events"], json!([]));

    for path in [
        format!("/organizer/events/{}/publish", Uuid::new_v4()),
        "/organizer/events/garbage/unpublish".to_owned(),
    ] {
        assert_eq!(
            org.post_form(&path, &[]).await.status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}

/// The value the edit page fills a time field in with.
fn shown_time(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" required value=\"");
    let start = page.find(&marker).map(|at| at + marker.len());
    let start = start.unwrap_or_else(|| panic!("no {name} field on the page: {page}"));
    page[start..].split('"').next().unwrap().to_owned()
}

async fn event_times(pool: &PgPool, event_id: Uuid) -> (OffsetDateTime, OffsetDateTime) {
    sqlx::query_as("SELECT starts_at, sale_opens_at FROM events WHERE id = $1")
        .bind(event_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn an_edit_keeps_the_exact_times_it_left_as_they_were_shown(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let tt = fixture.ticket_type_id();
    let edit = format!("/organizer/events/{}/edit", fixture.event_id);
    // Times to the second and below, as the API may set them.
    sqlx::query(
        "UPDATE events SET sale_opens_at = date_trunc('minute', sale_opens_at) + interval '30.123456 seconds',
                           starts_at = date_trunc('minute', starts_at) + interval '59 seconds'
         WHERE id = $1",
    )
    .bind(fixture.event_id)
    .execute(&pool)
    .await
    .unwrap();
    let before = event_times(&pool, fixture.event_id).await;
    assert_eq!(before.1.second(), 30);

    // The page shows them to the minute; sent back so, they do not move.
    let page = org.get(&edit).await.text().await.unwrap();
    let starts = shown_time(&page, "starts_at");
    let opens = shown_time(&page, "sale_opens_at");
    assert_eq!(starts, form_time(before.0));
    let fields = with(
        &with(&edit_form(tt, "Renamed", "10"), "starts_at", &starts),
        "sale_opens_at",
        &opens,
    );
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(event_title(&pool, fixture.event_id).await, "Renamed");
    assert_eq!(event_times(&pool, fixture.event_id).await, before);

    // A time the organizer changed is taken as typed.
    let later = form_time(before.1 + time::Duration::minutes(1));
    let fields = with(
        &with(&edit_form(tt, "Renamed", "10"), "starts_at", &starts),
        "sale_opens_at",
        &later,
    );
    let resp = org.post_form(&edit, &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let after = event_times(&pool, fixture.event_id).await;
    assert_eq!(after.0, before.0);
    assert_eq!(form_time(after.1), later);
    assert_eq!((after.1.second(), after.1.nanosecond()), (0, 0));
}

//! The overview, the new event form, and the pages' layout.

use super::*;

#[sqlx::test]
async fn organizer_overview_lists_every_event_including_drafts(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let published = owned_published_event(&org, &[TicketSpec::new(10, 4, 4)]).await;
    let opened = opened();
    let draft = owned_event(&org, opened, "draft", &[TicketSpec::new(7, 4, 4)]).await;
    api_buy(&app, published.ticket_type_id(), 3, "ada@example.org").await;

    let resp = org.get("/organizer").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(&format!(
            "href=\"/organizer/events/{}\"",
            published.event_id
        )),
        "{body}"
    );
    assert!(
        body.contains(&format!("href=\"/organizer/events/{}\"", draft.event_id)),
        "{body}"
    );
    assert!(body.contains(">draft<"), "{body}");
    assert!(body.contains(">published<"), "{body}");
    assert!(body.contains("3 / 10"), "{body}");
    assert!(body.contains("0 / 7"), "{body}");
    assert!(body.contains("href=\"/organizer/events/new\""), "{body}");
}

#[sqlx::test]
async fn organizer_new_event_form_has_every_field(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let org = app.organizer("org@example.org").await;
    let resp = org.get("/organizer/events/new").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("action=\"/organizer/events\""), "{body}");
    for name in [
        "title",
        "venue",
        "description",
        "starts_at",
        "sale_opens_at",
        "sale_closes_at",
        "status",
        "tt_name_0",
        "tt_price_0",
        "tt_currency_0",
        "tt_capacity_0",
        "tt_max_per_order_0",
        "tt_max_per_buyer_0",
        "tt_name_2",
        stampede::web::csrf::FIELD,
    ] {
        assert!(
            body.contains(&format!("name=\"{name}\"")),
            "no {name} input: {body}"
        );
    }
    assert!(!body.contains("tt_id_"), "{body}");
}

#[sqlx::test]
async fn organizer_creates_an_event_from_the_form_and_redirects_to_its_page(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fields = new_event_form("Form concert & friends");
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let event_page = location(&resp);
    let id = Uuid::parse_str(event_page.strip_prefix("/organizer/events/").unwrap()).unwrap();

    let (title, venue, status, starts_at, owner): (
        String,
        String,
        String,
        OffsetDateTime,
        Option<Uuid>,
    ) = sqlx::query_as(
        "SELECT title, venue, status, starts_at, organizer_id FROM events WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (title.as_str(), venue.as_str(), status.as_str()),
        ("Form concert & friends", "Main hall", "published")
    );
    assert_eq!(form_time(starts_at), "2030-03-01T19:30");
    assert_eq!(owner, Some(org.id), "the event belongs to its creator");
    let tts: Vec<(String, i64, String, i32, i32, i32, i32)> = sqlx::query_as(
        "SELECT name, price_minor, currency, capacity, remaining, max_per_order, max_per_buyer
         FROM ticket_types WHERE event_id = $1",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        tts,
        vec![(
            "Standing".to_owned(),
            2500,
            "EUR".to_owned(),
            120,
            120,
            4,
            6
        )]
    );

    // The redirect target is the event's organizer page (its content is the
    // dashboard's business); its edit form shows the event, and buyers can
    // see it.
    let resp = org.get(&event_page).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = org.get(&format!("{event_page}/edit")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("Form concert &amp; friends"), "{body}");
    assert!(body.contains("on sale now"), "{body}");
    let public = get(&app, &format!("/events/{id}")).await;
    assert_eq!(public.status(), StatusCode::OK);
    assert!(public.text().await.unwrap().contains("120 of 120 left"));

    // Without the checkbox, the event stays a draft.
    let draft_fields = without(&fields, "status");
    let resp = org
        .post_form("/organizer/events", &borrowed(&draft_fields))
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let draft_id =
        Uuid::parse_str(location(&resp).strip_prefix("/organizer/events/").unwrap()).unwrap();
    assert_eq!(event_status(&pool, draft_id).await, "draft");
    assert_eq!(
        get(&app, &format!("/events/{draft_id}")).await.status(),
        StatusCode::NOT_FOUND
    );
}

#[sqlx::test]
async fn organizer_form_with_invalid_input_comes_back_with_the_message_and_writes_nothing(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let valid = new_event_form("Kept title");
    let no_types = {
        let mut fields = valid.clone();
        for name in [
            "tt_name_0",
            "tt_price_0",
            "tt_capacity_0",
            "tt_max_per_order_0",
            "tt_max_per_buyer_0",
        ] {
            fields = with(&fields, name, "");
        }
        fields
    };
    let cases = [
        (with(&valid, "title", ""), "This field is required.", false),
        (without(&valid, "title"), "This field is required.", false),
        (
            with(&valid, "starts_at", "next friday"),
            "&quot;next friday&quot; is not a date and time such as 2027-03-01T19:30.",
            true,
        ),
        (
            with(&valid, "sale_opens_at", "2030-13-01T10:00"),
            "is not a date and time such as 2027-03-01T19:30.",
            true,
        ),
        (
            with(&valid, "tt_capacity_0", "-5"),
            "Enter a number from 0 to 1000000.",
            true,
        ),
        (no_types, "Add at least one ticket type.", true),
        (
            with(&valid, "tt_price_0", "12,50"),
            "&quot;12,50&quot; is not a price such as 12.50.",
            true,
        ),
        (
            with(&valid, "sale_opens_at", "2031-01-01T10:00"),
            "The sale must open before the event starts.",
            true,
        ),
        (
            with(&valid, "tt_max_per_buyer_0", "2"),
            "The limit per buyer cannot be below the limit per order.",
            true,
        ),
    ];
    for (fields, message, title_kept) in cases {
        let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{message}");
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "{message}: {body}");
        assert!(body.contains("role=\"alert\""), "{message}: {body}");
        if message != "Add at least one ticket type." {
            // The input the message is about is marked (a missing row has none).
            assert!(body.contains("aria-invalid=\"true\""), "{message}: {body}");
        }
        if title_kept {
            assert!(body.contains("value=\"Kept title\""), "{message}: {body}");
        }
        assert!(body.contains("value=\"Main hall\""), "{message}: {body}");
        assert!(
            body.contains("action=\"/organizer/events\""),
            "{message}: {body}"
        );
    }
    assert_eq!(event_count(&pool).await, 0);
    assert_eq!(ticket_type_count(&pool).await, 0);
}

#[sqlx::test]
async fn organizer_form_body_over_64_kib_is_refused_with_413(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let huge = "d".repeat(64 * 1024);
    let fields = with(&new_event_form("Huge"), "description", &huge);
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(event_count(&pool).await, 0);
}

/// A complete HTML document in the site frame: doctype, title, stylesheet
/// and script (the script makes forms submit once), navigation.
fn assert_full_page(what: &str, body: &str) {
    assert!(
        body.starts_with("<!DOCTYPE html>"),
        "{what}: not a full HTML document: {body}"
    );
    assert!(body.contains("<title>"), "{what}: no <title>: {body}");
    assert!(
        body.contains("href=\"/static/style.css?v="),
        "{what}: no stylesheet: {body}"
    );
    assert!(
        body.contains("src=\"/static/app.js?v="),
        "{what}: no script: {body}"
    );
    assert!(
        body.contains("<nav aria-label=\"Main\">"),
        "{what}: no navigation: {body}"
    );
}

#[sqlx::test]
async fn buyer_and_error_pages_are_full_pages_with_the_site_layout(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let order_id = api_buy(&app, fixture.ticket_type_id(), 1, "ada@example.org").await;
    for path in [
        "/".to_owned(),
        format!("/events/{}", fixture.event_id),
        format!("/orders/{order_id}"),
        "/missing".to_owned(),
    ] {
        let body = get(&app, &path).await.text().await.unwrap();
        assert_full_page(&path, &body);
    }
    // The organizer overview, as its logged-in organizer sees it.
    let org = app.organizer("org@example.org").await;
    let resp = org.get("/organizer").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_full_page("/organizer", &resp.text().await.unwrap());
    let resp = buy_on_page(&app, &fixture, "0", "ada@example.org", "k").await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_full_page("refused buy form", &resp.text().await.unwrap());
}

#[sqlx::test]
async fn organizer_event_forms_are_full_pages_with_the_site_layout(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 4, 4)]).await;
    for path in [
        "/organizer/events/new".to_owned(),
        format!("/organizer/events/{}/edit", fixture.event_id),
    ] {
        let resp = org.get(&path).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_full_page(&path, &resp.text().await.unwrap());
    }
    let fields = with(&new_event_form("Refused"), "starts_at", "never");
    let resp = org.post_form("/organizer/events", &borrowed(&fields)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_full_page("refused organizer form", &resp.text().await.unwrap());
}

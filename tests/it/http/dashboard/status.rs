//! The status bar, navigation, and who may see the dashboard.

use super::*;

#[sqlx::test]
async fn status_bar_publishes_edits_and_cancels_from_the_dashboard(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Status",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    let order = buy(&pool, tts[0], 2, "ada@example.org").await;
    let path = format!("/organizer/events/{event}");

    let index = page(&org, "/organizer").await;
    assert!(index.contains(&format!("href=\"{path}\"")), "{index}");

    let body = page(&org, &path).await;
    let cancel_form = slice(&body, &format!("action=\"{path}/cancel\""), "</form>");
    assert!(cancel_form.contains("data-once"), "{cancel_form}");
    assert!(cancel_form.contains("data-confirm=\""), "{cancel_form}");
    let csrf_input = format!("name=\"{}\"", stampede::web::csrf::FIELD);
    assert!(cancel_form.contains(&csrf_input), "{cancel_form}");
    assert!(cancel_form.contains("Cancel event"), "{cancel_form}");
    assert!(
        body.contains(&format!("action=\"{path}/unpublish\"")),
        "{body}"
    );
    assert!(body.contains(&format!("href=\"{path}/edit\"")), "{body}");
    assert!(
        body.contains(&format!("href=\"{path}/orders.csv\"")),
        "{body}"
    );
    // Every POST form carries the CSRF field.
    assert_eq!(
        body.matches("method=\"post\"").count(),
        body.matches(&csrf_input).count()
    );

    // Unpublish, publish: back on the dashboard each time.
    for (action, status) in [("unpublish", "draft"), ("publish", "published")] {
        let resp = org.post_form(&format!("{path}/{action}"), &[]).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        assert_eq!(location(&resp), path);
        let body = page(&org, &path).await;
        assert!(
            body.contains(&format!("<strong>{status}</strong>")),
            "{body}"
        );
    }

    // The edit form lives at /edit and posts there.
    let edit = page(&org, &format!("{path}/edit")).await;
    assert!(edit.contains(&format!("action=\"{path}/edit\"")), "{edit}");
    assert!(edit.contains(&format!("href=\"{path}\"")), "{edit}");
    let starts_at = form_time(common::now() + Span::days(30));
    let opens_at = form_time(common::now() - Span::hours(1));
    let resp = org
        .post_form(
            &format!("{path}/edit"),
            &[
                ("title", "Status, renamed"),
                ("venue", "Hall 2"),
                ("description", ""),
                ("starts_at", &starts_at),
                ("sale_opens_at", &opens_at),
                ("tt_id_0", &tts[0].to_string()),
                ("tt_name_0", "Standing"),
                ("tt_price_0", "25.00"),
                ("tt_currency_0", "EUR"),
                ("tt_capacity_0", "120"),
                ("tt_max_per_order_0", "10"),
                ("tt_max_per_buyer_0", "10"),
            ],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), path);
    let body = page(&org, &path).await;
    assert!(body.contains("<h1>Status, renamed</h1>"), "{body}");
    assert_eq!(
        cell(slice(&body, "data-ticket-type", "</tr>"), "remaining"),
        "118"
    );

    // Cancel: every order is cancelled and the bar offers nothing more.
    let resp = org.post_form(&format!("{path}/cancel"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), path);
    let body = page(&org, &path).await;
    assert!(body.contains("<strong>cancelled</strong>"), "{body}");
    assert!(
        !body.contains(&format!("action=\"{path}/cancel\"")),
        "{body}"
    );
    assert!(!body.contains(&format!("href=\"{path}/edit\"")), "{body}");
    assert!(!body.contains("/publish\""), "{body}");
    let row = slice(&body, "data-ticket-type", "</tr>");
    assert_eq!(cell(row, "sold"), "0");
    assert_eq!(cell(row, "remaining"), "120");
    assert!(slice(&body, &format!("data-order=\"{order}\""), "</tr>").contains("cancelled"));
}

#[sqlx::test]
async fn another_organizer_gets_not_found_for_the_dashboard_and_the_export(pool: PgPool) {
    let (app, owner) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &owner,
        "Mine",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    buy(&pool, tts[0], 2, "ada@example.org").await;
    let intruder = app.organizer("b@example.org").await;

    for path in [
        format!("/organizer/events/{event}"),
        format!("/organizer/events/{event}?q=ada&page=1"),
        format!("/organizer/events/{event}/orders.csv"),
        format!("/organizer/events/{}", Uuid::new_v4()),
        format!("/organizer/events/{}/orders.csv", Uuid::new_v4()),
        "/organizer/events/not-an-id".to_owned(),
        "/organizer/events/not-an-id/orders.csv".to_owned(),
    ] {
        let resp = intruder.get(&path).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        let body = resp.text().await.unwrap();
        assert!(!body.contains("ada@example.org"), "{path}");
    }
    // Still there for its owner.
    let resp = owner
        .get(&format!("/organizer/events/{event}/orders.csv"))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.text().await.unwrap().contains("ada@example.org"));
}

#[sqlx::test]
async fn visitors_who_are_not_logged_in_are_sent_to_log_in(pool: PgPool) {
    let (app, org) = setup(&pool).await;
    let (event, _) = create_event(
        &pool,
        &org,
        "Private",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    for path in [
        format!("/organizer/events/{event}"),
        format!("/organizer/events/{event}/orders.csv"),
    ] {
        let resp = app.client.get(app.url(&path)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{path}");
        let next: String = form_urlencoded::byte_serialize(path.as_bytes()).collect();
        assert_eq!(location(&resp), format!("/login?next={next}"), "{path}");
    }
}

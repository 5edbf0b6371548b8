//! Issue 7, items 5 and 6: what one organizer can create is bounded.

use reqwest::StatusCode;
use sqlx::PgPool;

use crate::common::{forms::*, organizer::*, *};

/// The edit form of a one-type event that leaves the existing type out and
/// adds `new` ticket types, as a hand-made post can.
fn edit_adding(fixture: &Fixture, new: usize) -> Fields {
    let mut fields = without(
        &edit_form(fixture.ticket_type_id(), "Test concert", "10"),
        "tt_id_0",
    );
    fields.retain(|(k, _)| !k.starts_with("tt_"));
    for i in 0..new {
        for (name, value) in [
            ("name", format!("Extra {i}")),
            ("price", "1.00".to_owned()),
            ("currency", "EUR".to_owned()),
            ("capacity", "5".to_owned()),
        ] {
            fields.push((format!("tt_{name}_{i}"), value));
        }
    }
    fields
}

async fn types_of(pool: &PgPool, fixture: &Fixture) -> i64 {
    scalar(
        pool,
        "SELECT count(*) FROM ticket_types WHERE event_id = $1",
        fixture.event_id,
    )
    .await
}

#[sqlx::test]
async fn edits_cannot_take_an_event_past_twenty_ticket_types(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_event(&org, opened(), "draft", &[TicketSpec::new(10, 4, 8)]).await;
    let path = format!("/organizer/events/{}/edit", fixture.event_id);

    // 1 existing + 20 new: refused, naming ticket_types, nothing written.
    let resp = org
        .post_form(&path, &borrowed(&edit_adding(&fixture, 20)))
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = resp.text().await.unwrap();
    assert!(body.contains("at most 20 ticket types"), "{body}");
    assert!(
        body.contains("Extra 19"),
        "the form comes back filled in: {body}"
    );
    assert_eq!(types_of(&pool, &fixture).await, 1);

    // 1 + 19 fits; then not one more.
    let resp = org
        .post_form(&path, &borrowed(&edit_adding(&fixture, 19)))
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(types_of(&pool, &fixture).await, 20);
    let resp = org
        .post_form(&path, &borrowed(&edit_adding(&fixture, 1)))
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(types_of(&pool, &fixture).await, 20);
    // The event can still be edited.
    assert_eq!(org.get(&path).await.status(), StatusCode::OK);
}

#[sqlx::test]
async fn concurrent_edits_cannot_together_pass_twenty_ticket_types(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_event(&org, opened(), "draft", &[TicketSpec::new(10, 4, 8)]).await;
    let path = format!("/organizer/events/{}/edit", fixture.event_id);
    let fields = edit_adding(&fixture, 10);
    let fields = borrowed(&fields);
    let posts = (0..6).map(|_| org.post_form(&path, &fields));
    let statuses: Vec<StatusCode> = futures::future::join_all(posts)
        .await
        .iter()
        .map(|r| r.status())
        .collect();
    let ok = statuses
        .iter()
        .filter(|s| **s == StatusCode::SEE_OTHER)
        .count();
    assert_eq!(ok, 1, "{statuses:?}");
    assert_eq!(types_of(&pool, &fixture).await, 11);
}

/// Issue 7, item 6: the export is streamed (chunked, no length known in
/// advance) and still has every order, in order.
#[sqlx::test]
async fn the_csv_export_streams_many_orders_in_chunks(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("org@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(100_000, 10, 10)]).await;
    let orders = 20_000;
    sqlx::query(
        "INSERT INTO orders (ticket_type_id, email, quantity, idempotency_key, unit_price_minor,
                             currency, created_at)
         SELECT $1, 'buyer' || g || '@example.org', 1, 'key-' || g || '-0123456789abcdef', 2500,
                'EUR', now() - interval '1 second' * ($2 - g)
         FROM generate_series(1, $2) g",
    )
    .bind(fixture.ticket_type_id())
    .bind(orders)
    .execute(&pool)
    .await
    .unwrap();

    let resp = org
        .get(&format!(
            "/organizer/events/{}/orders.csv",
            fixture.event_id
        ))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers().get("content-length").is_none(),
        "a streamed body has no length up front: {:?}",
        resp.headers()
    );
    assert_eq!(resp.headers()["transfer-encoding"], "chunked");
    let body = resp.bytes().await.unwrap();
    assert!(body.len() > 4 * 32 * 1024, "{} bytes", body.len());
    let mut reader = csv::ReaderBuilder::new().from_reader(&body[..]);
    let emails: Vec<String> = reader.records().map(|r| r.unwrap()[2].to_owned()).collect();
    assert_eq!(emails.len(), orders as usize);
    assert_eq!(emails[0], "buyer1@example.org");
    assert_eq!(
        emails[orders as usize - 1],
        format!("buyer{orders}@example.org")
    );
}

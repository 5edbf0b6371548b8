//! Finding 5: the organizer's view of an event's waiting-list places is
//! paged (the API's `entries`, and the page), not cut at 2,000.

use super::*;

use common::organizer::owned_published_event;
use reqwest::Method;
use serde_json::Value;

/// `n` places over the event's two ticket types: in line, unconfirmed and
/// left, as the list's order mixes them.
async fn places(pool: &PgPool, types: &[Uuid], n: i64) {
    sqlx::query(
        "INSERT INTO waitlist_entries (id, ticket_type_id, email, buyer_key, quantity, status,
                                       token_hash, position, created_at)
         SELECT gen_random_uuid(), ($1::uuid[])[1 + i % 2], 'p' || i || '@example.org',
                'p' || i || '@example.org', 1,
                (ARRAY['waiting', 'unconfirmed', 'waiting', 'left'])[1 + i % 4], '\\x00',
                CASE WHEN i % 4 IN (0, 2) THEN nextval('waitlist_position') END,
                now() - make_interval(secs => i % 7)
         FROM generate_series(1, $2) AS i",
    )
    .bind(types)
    .bind(n)
    .execute(pool)
    .await
    .unwrap();
}

/// The places in the list's order, from the tables.
async fn in_order(pool: &PgPool, event: Uuid) -> Vec<Uuid> {
    sqlx::query_scalar(
        "SELECT w.id FROM waitlist_entries w JOIN ticket_types t ON t.id = w.ticket_type_id
         WHERE t.event_id = $1
         ORDER BY t.position, w.status <> 'waiting', w.position NULLS LAST, w.created_at, w.id",
    )
    .bind(event)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn the_places_are_paged_and_every_place_comes_once(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("lists@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[TicketSpec::new(10, 2, 2), TicketSpec::new(10, 2, 2)],
    )
    .await;
    places(&pool, &fixture.ticket_type_ids, 130).await;
    let all = in_order(&pool, fixture.event_id).await;
    assert_eq!(all.len(), 130);

    let path = format!("/api/v1/organizer/events/{}/waiting-list", fixture.event_id);
    let (mut seen, mut after, mut pages) = (Vec::<Uuid>::new(), None::<String>, 0);
    loop {
        let query = match &after {
            Some(next) => format!("?limit=25&after={next}"),
            None => "?limit=25".to_owned(),
        };
        let resp = org
            .api(Method::GET, &format!("{path}{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        let entries = body["entries"].as_array().unwrap();
        assert!(entries.len() <= 25);
        seen.extend(
            entries
                .iter()
                .map(|e| e["id"].as_str().unwrap().parse::<Uuid>().unwrap()),
        );
        pages += 1;
        match body["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 6);
    assert_eq!(seen, all, "every place once, in the list's order");

    // The page: 100 places, then a link to the other 30.
    let base = format!("/organizer/events/{}/waiting-list", fixture.event_id);
    let emails = |html: &str| html.matches("@example.org</td>").count();
    let first = org.get(&base).await.text().await.unwrap();
    assert_eq!(emails(&first), 100);
    let next = first
        .split("rel=\"next\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a link to the next page")
        .to_owned();
    let second = org.get(&next).await.text().await.unwrap();
    assert_eq!(emails(&second), 30);
    assert!(!second.contains("rel=\"next\""));
}

//! The organizer API v1 (issue 11): one event, its ticket types, orders
//! and stats, behind the token and scoped to its owner; the edit page's
//! rules; cursor pagination and incremental sync; the cancel that returns
//! tickets once; the per-token rate limit. Every count is read from the
//! tables.

use std::collections::{BTreeSet, HashMap};

use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{
    common::{organizer::*, *},
    http::support::*,
};

async fn send(org: &Organizer, method: Method, path: &str, body: Option<&Value>) -> Response {
    let request = org.api(method, path);
    let request = match body {
        Some(body) => request.json(body),
        None => request,
    };
    request.send().await.unwrap()
}

async fn ok_json(resp: Response) -> Value {
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    assert!(status.is_success(), "{status}: {body}");
    body
}

fn event_path(fixture: &Fixture) -> String {
    format!("/api/v1/organizer/events/{}", fixture.event_id)
}

/// Everything a route could have written, as one comparable snapshot.
async fn tables(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT x FROM (
             SELECT 'e ' || id || status || title || venue || starts_at || coalesce(max_per_buyer, 0) AS x FROM events
             UNION ALL SELECT 't ' || id || name || price_minor || currency || capacity || remaining
                              || max_per_order || max_per_buyer || sales_halted FROM ticket_types
             UNION ALL SELECT 'o ' || id || status || updated_at FROM orders
         ) s ORDER BY x",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Every new route, with a body it would accept from its owner.
fn routes(fixture: &Fixture, order_id: Uuid) -> Vec<(Method, String, Option<Value>)> {
    let event = event_path(fixture);
    let tt = fixture.ticket_type_ids[1];
    vec![
        (Method::GET, event.clone(), None),
        (
            Method::PATCH,
            event.clone(),
            Some(json!({"title": "Renamed"})),
        ),
        (Method::POST, format!("{event}/publish"), None),
        (Method::POST, format!("{event}/unpublish"), None),
        (Method::POST, format!("{event}/cancel"), None),
        (Method::GET, format!("{event}/ticket-types"), None),
        (
            Method::POST,
            format!("{event}/ticket-types"),
            Some(json!({"name": "Late", "price_minor": 100, "currency": "EUR", "capacity": 5})),
        ),
        (
            Method::PATCH,
            format!("{event}/ticket-types/{tt}"),
            Some(json!({"capacity": 99})),
        ),
        (Method::DELETE, format!("{event}/ticket-types/{tt}"), None),
        (
            Method::POST,
            format!("{event}/ticket-types/{tt}/pause"),
            None,
        ),
        (
            Method::POST,
            format!("{event}/ticket-types/{tt}/resume"),
            None,
        ),
        (Method::GET, format!("{event}/orders"), None),
        (Method::GET, format!("{event}/stats"), None),
        (Method::GET, format!("{event}/stats/sales"), None),
        (
            Method::GET,
            format!("/api/v1/organizer/orders/{order_id}"),
            None,
        ),
        (
            Method::POST,
            format!("/api/v1/organizer/orders/{order_id}/cancel"),
            None,
        ),
    ]
}

#[sqlx::test]
async fn every_route_needs_a_token_and_hides_other_organizers_objects(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let owner = app.organizer("owner@example.org").await;
    let other = app.organizer("other@example.org").await;
    let fixture = owned_published_event(
        &owner,
        &[TicketSpec::new(10, 4, 4), TicketSpec::new(10, 4, 4)],
    )
    .await;
    let order_id = api_buy(&app, fixture.ticket_type_id(), 2, "buyer@example.org").await;
    // The owner's own token, revoked.
    let revoked = stampede::auth::create_token(&pool, owner.id.into(), "revoked")
        .await
        .unwrap();
    sqlx::query("UPDATE api_tokens SET revoked_at = now() WHERE name = 'revoked'")
        .execute(&pool)
        .await
        .unwrap();
    let before = tables(&pool).await;
    for (method, path, body) in routes(&fixture, order_id) {
        let mut anonymous = app.client.request(method.clone(), app.url(&path));
        if let Some(body) = &body {
            anonymous = anonymous.json(body);
        }
        let resp = anonymous.send().await.unwrap();
        assert_api_error(resp, StatusCode::UNAUTHORIZED, "unauthorized", None).await;
        for token in ["not-a-token", revoked.as_str()] {
            let mut wrong = app
                .client
                .request(method.clone(), app.url(&path))
                .bearer_auth(token);
            if let Some(body) = &body {
                wrong = wrong.json(body);
            }
            let resp = wrong.send().await.unwrap();
            assert_api_error(resp, StatusCode::UNAUTHORIZED, "unauthorized", None).await;
        }
        let resp = send(&other, method.clone(), &path, body.as_ref()).await;
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
        assert_eq!(tables(&pool).await, before, "{method} {path} wrote");
    }
    // The owner reaches each of them: after the event's cancel (fifth), the
    // writes on it answer 409 (`event_cancelled`, `already_cancelled`).
    for (method, path, body) in routes(&fixture, order_id) {
        let resp = send(&owner, method.clone(), &path, body.as_ref()).await;
        assert!(
            resp.status().is_success() || resp.status() == StatusCode::CONFLICT,
            "{method} {path}: {}",
            resp.status()
        );
    }
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn wrong_input_names_the_field_and_writes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("fields@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[TicketSpec::new(10, 4, 4), TicketSpec::new(10, 4, 4)],
    )
    .await;
    api_buy(&app, fixture.ticket_type_id(), 3, "buyer@example.org").await;
    let event = event_path(&fixture);
    let tt = fixture.ticket_type_ids[0];
    let before = tables(&pool).await;
    let cases: Vec<(Method, String, Value, &str)> = vec![
        (
            Method::PATCH,
            event.clone(),
            json!({"starts_at": "soon"}),
            "starts_at",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"title": "  "}),
            "title",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"colour": "red"}),
            "colour",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"status": "published"}),
            "status",
        ),
        (Method::PATCH, event.clone(), json!({"title": 7}), "title"),
        (
            Method::PATCH,
            event.clone(),
            json!({"sale_opens_at": "2099-01-01T00:00:00Z"}),
            "sale_opens_at",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"max_per_buyer": 0}),
            "max_per_buyer",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"title": "New", "ticket_types": [{"id": Uuid::new_v4(), "capacity": 5}]}),
            "ticket_types[0].id",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"title": "New", "ticket_types": [
                {"id": fixture.ticket_type_ids[1], "name": "Fine"},
                {"id": tt, "currency": "euro"}]}),
            "ticket_types[1].currency",
        ),
        (
            Method::PATCH,
            event.clone(),
            json!({"ticket_types": [{"id": tt, "price": 5}]}),
            "ticket_types[0].price",
        ),
        (
            Method::POST,
            format!("{event}/ticket-types"),
            json!({"price_minor": 100, "currency": "EUR", "capacity": 5}),
            "name",
        ),
        (
            Method::POST,
            format!("{event}/ticket-types"),
            json!({"name": "General admission 0", "price_minor": 100, "currency": "EUR",
                   "capacity": 5}),
            "name",
        ),
        (
            Method::POST,
            format!("{event}/ticket-types"),
            json!({"name": "Late", "price_minor": -1, "currency": "EUR", "capacity": 5}),
            "price_minor",
        ),
        (
            Method::PATCH,
            format!("{event}/ticket-types/{tt}"),
            json!({"capacity": -1}),
            "capacity",
        ),
        (
            Method::PATCH,
            format!("{event}/ticket-types/{tt}"),
            json!({"max_per_order": 5, "max_per_buyer": 4}),
            "max_per_buyer",
        ),
        (
            Method::PATCH,
            format!("{event}/ticket-types/{tt}"),
            json!({"remaining": 100}),
            "remaining",
        ),
    ];
    for (method, path, body, field) in cases {
        let resp = send(&org, method.clone(), &path, Some(&body)).await;
        assert_invalid(resp, field).await;
        assert_eq!(tables(&pool).await, before, "{method} {path} {body} wrote");
    }
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("status=refunded", "status"),
        ("modified_since=yesterday", "modified_since"),
        ("after=nonsense", "after"),
        ("page=2", "page"),
    ] {
        let resp = send(&org, Method::GET, &format!("{event}/orders?{query}"), None).await;
        assert_invalid(resp, field).await;
    }
    for (query, field) in [
        ("from=noon", "from"),
        ("from=2027-01-02T00:00:00Z&to=2027-01-01T00:00:00Z", "to"),
        ("from=2027-01-01T00:00:00Z&to=2027-01-03T00:00:00Z", "to"),
    ] {
        let resp = send(
            &org,
            Method::GET,
            &format!("{event}/stats/sales?{query}"),
            None,
        )
        .await;
        assert_invalid(resp, field).await;
    }
    // Malformed JSON is a 400; still nothing written.
    let resp = org
        .api(Method::PATCH, &event)
        .header("content-type", "application/json")
        .body("{\"title\": ")
        .send()
        .await
        .unwrap();
    assert_api_error(resp, StatusCode::BAD_REQUEST, "invalid", None).await;
    assert_eq!(tables(&pool).await, before);
}

#[sqlx::test]
async fn a_capacity_raise_adds_to_what_is_left_and_below_sold_is_refused(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("capacity@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[TicketSpec::new(10, 4, 4), TicketSpec::new(10, 4, 4)],
    )
    .await;
    let tt = fixture.ticket_type_id();
    api_buy(&app, tt, 3, "a@example.org").await;
    api_buy(&app, tt, 3, "b@example.org").await;
    let event = event_path(&fixture);
    let tt_path = format!("{event}/ticket-types/{tt}");

    let body = ok_json(
        send(
            &org,
            Method::PATCH,
            &tt_path,
            Some(&json!({"capacity": 15})),
        )
        .await,
    )
    .await;
    assert_eq!(
        (
            &body["capacity"],
            &body["sold"],
            &body["remaining"],
            &body["halted"]
        ),
        (&json!(15), &json!(6), &json!(9), &json!(false))
    );
    assert_eq!(capacity_and_remaining(&pool, tt).await, (15, 9));

    // Below what is sold: refused, named, nothing changed.
    let resp = send(&org, Method::PATCH, &tt_path, Some(&json!({"capacity": 5}))).await;
    let body = assert_invalid(resp, "capacity").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("6 tickets"),
        "{body}"
    );
    assert_eq!(capacity_and_remaining(&pool, tt).await, (15, 9));
    // The same through the event's update, the row named as sent.
    let resp = send(
        &org,
        Method::PATCH,
        &event,
        Some(&json!({"title": "Changed", "ticket_types": [
            {"id": fixture.ticket_type_ids[1], "capacity": 12},
            {"id": tt, "capacity": 5}]})),
    )
    .await;
    assert_invalid(resp, "ticket_types[1].capacity").await;
    assert_eq!(capacity_and_remaining(&pool, tt).await, (15, 9));
    assert_eq!(
        capacity_and_remaining(&pool, fixture.ticket_type_ids[1]).await,
        (10, 10)
    );
    assert_eq!(event_title(&pool, fixture.event_id).await, "Test concert");

    // Down to exactly what is sold: nothing left, nothing oversold.
    let body = ok_json(
        send(
            &org,
            Method::PATCH,
            &event,
            Some(&json!({"title": "Changed", "ticket_types": [{"id": tt, "capacity": 6}]})),
        )
        .await,
    )
    .await;
    assert_eq!(body["title"], "Changed");
    assert_eq!(body["ticket_types"][0]["remaining"], 0);
    assert_eq!(capacity_and_remaining(&pool, tt).await, (6, 0));
    assert_invariants(&pool).await;
}

/// Found by the API fuzzer (tests/openapi_fuzz.rs): a limit per buyer
/// lowered below what a buyer already held was saved, and the table-level
/// invariant (every buyer within the limits) no longer held.
#[sqlx::test]
async fn a_limit_per_buyer_below_what_a_buyer_holds_is_refused(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("limits@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(20, 2, 5)]).await;
    let tt = fixture.ticket_type_id();
    api_buy(&app, tt, 2, "a@example.org").await;
    api_buy(&app, tt, 1, "a@example.org").await;
    let event = event_path(&fixture);
    let tt_path = format!("{event}/ticket-types/{tt}");
    let limits = |pool: PgPool| async move {
        sqlx::query_as::<_, (i32, Option<i32>)>(
            "SELECT t.max_per_buyer, e.max_per_buyer FROM ticket_types t
             JOIN events e ON e.id = t.event_id WHERE t.id = $1",
        )
        .bind(tt)
        .fetch_one(&pool)
        .await
        .unwrap()
    };

    // The ticket type's limit, alone and through the event's update.
    let resp = send(
        &org,
        Method::PATCH,
        &tt_path,
        Some(&json!({"max_per_buyer": 2})),
    )
    .await;
    let body = assert_invalid(resp, "max_per_buyer").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 tickets"),
        "{body}"
    );
    let resp = send(
        &org,
        Method::PATCH,
        &event,
        Some(&json!({"ticket_types": [{"id": tt, "max_per_buyer": 2}]})),
    )
    .await;
    assert_invalid(resp, "ticket_types[0].max_per_buyer").await;
    // The event's limit across its ticket types.
    let resp = send(
        &org,
        Method::PATCH,
        &event,
        Some(&json!({"max_per_buyer": 2})),
    )
    .await;
    assert_invalid(resp, "max_per_buyer").await;
    assert_eq!(limits(pool.clone()).await, (5, None));

    // Down to exactly what is held: allowed.
    ok_json(
        send(
            &org,
            Method::PATCH,
            &tt_path,
            Some(&json!({"max_per_buyer": 3})),
        )
        .await,
    )
    .await;
    ok_json(
        send(
            &org,
            Method::PATCH,
            &event,
            Some(&json!({"max_per_buyer": 3})),
        )
        .await,
    )
    .await;
    assert_eq!(limits(pool.clone()).await, (3, Some(3)));
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn a_ticket_type_is_deleted_only_while_nothing_is_sold(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("delete@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[
            TicketSpec::new(10, 4, 4),
            TicketSpec::new(10, 4, 4),
            TicketSpec::new(10, 4, 4),
        ],
    )
    .await;
    let [sold, cancelled, unsold] = fixture.ticket_type_ids[..] else {
        unreachable!()
    };
    api_buy(&app, sold, 1, "a@example.org").await;
    let order = api_buy(&app, cancelled, 1, "b@example.org").await;
    let resp = send(
        &org,
        Method::POST,
        &format!("/api/v1/organizer/orders/{order}/cancel"),
        None,
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let event = event_path(&fixture);
    for tt in [sold, cancelled] {
        let resp = send(
            &org,
            Method::DELETE,
            &format!("{event}/ticket-types/{tt}"),
            None,
        )
        .await;
        assert_api_error(resp, StatusCode::CONFLICT, "ticket_type_sold", None).await;
    }
    let resp = send(
        &org,
        Method::DELETE,
        &format!("{event}/ticket-types/{unsold}"),
        None,
    )
    .await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let left: BTreeSet<Uuid> =
        sqlx::query_scalar("SELECT id FROM ticket_types WHERE event_id = $1")
            .bind(fixture.event_id)
            .fetch_all(&pool)
            .await
            .unwrap()
            .into_iter()
            .collect();
    assert_eq!(left, BTreeSet::from([sold, cancelled]));
    let list = ok_json(send(&org, Method::GET, &format!("{event}/ticket-types"), None).await).await;
    assert_eq!(list["ticket_types"].as_array().unwrap().len(), 2);
    assert_eq!(list["next"], Value::Null);
    assert_invariants(&pool).await;
}

/// Orders of the event through the API, page by page.
async fn walk(
    org: &Organizer,
    fixture: &Fixture,
    query: &str,
    mut between: impl AsyncFnMut(),
) -> Vec<Value> {
    let mut orders = Vec::new();
    let mut after = String::new();
    for _ in 0..1000 {
        let path = format!("{}/orders?{query}&after={after}", event_path(fixture));
        let page = ok_json(send(org, Method::GET, &path, None).await).await;
        orders.extend(page["orders"].as_array().unwrap().iter().cloned());
        between().await;
        match page["next"].as_str() {
            Some(next) => after = next.to_owned(),
            None => return orders,
        }
    }
    panic!("the walk did not end");
}

#[sqlx::test]
async fn cursor_pages_return_every_order_once_while_purchases_go_on(pool: PgPool) {
    let app = TestApp::spawn_for_bursts(pool.clone()).await;
    let org = app.organizer("walk@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[TicketSpec::new(1000, 4, 4), TicketSpec::new(1000, 4, 4)],
    )
    .await;
    for i in 0..40 {
        let tt = fixture.ticket_type_ids[i % 2];
        api_buy(&app, tt, 1, &format!("early{i}@example.org")).await;
    }
    let before = confirmed_order_ids(&pool).await;
    let mut round = 0;
    let orders = walk(&org, &fixture, "limit=7", async || {
        // Concurrent purchases while the walk goes on.
        round += 1;
        let buys = (0..3).map(|i| {
            let tt = fixture.ticket_type_ids[i % 2];
            api_buy_later(&app, tt, format!("late{round}-{i}@example.org"))
        });
        futures::future::join_all(buys).await;
    })
    .await;
    let ids: Vec<Uuid> = orders
        .iter()
        .map(|o| Uuid::parse_str(o["id"].as_str().unwrap()).unwrap())
        .collect();
    let unique: BTreeSet<Uuid> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an order came twice");
    assert!(
        unique.is_superset(&before),
        "an order that existed was skipped"
    );
    // What the walk returned exists, and in (updated_at, id) order.
    let keys: Vec<(String, String)> = orders
        .iter()
        .map(|o| {
            (
                o["updated_at"].as_str().unwrap().to_owned(),
                o["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(keys.len() >= 40);
    assert!(unique.is_subset(&confirmed_order_ids(&pool).await));
}

async fn api_buy_later(app: &TestApp, tt: Uuid, email: String) {
    api_buy(app, tt, 1, &email).await;
}

#[sqlx::test]
async fn modified_since_returns_an_order_cancelled_after_the_sync(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("sync@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(100, 4, 4)]).await;
    let tt = fixture.ticket_type_id();
    let first = api_buy(&app, tt, 1, "a@example.org").await;
    api_buy(&app, tt, 2, "b@example.org").await;
    let last = api_buy(&app, tt, 1, "c@example.org").await;
    let synced = walk(&org, &fixture, "limit=2", async || {}).await;
    assert_eq!(synced.len(), 3);
    let sync_point = synced.last().unwrap()["updated_at"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(synced.last().unwrap()["id"], last.to_string());

    let cancelled = ok_json(
        send(
            &org,
            Method::POST,
            &format!("/api/v1/organizer/orders/{first}/cancel"),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(cancelled["status"], "cancelled");
    let since = form_urlencoded::byte_serialize(sync_point.as_bytes()).collect::<String>();
    let changed = walk(
        &org,
        &fixture,
        &format!("modified_since={since}"),
        async || {},
    )
    .await;
    let ids: Vec<&str> = changed.iter().map(|o| o["id"].as_str().unwrap()).collect();
    // The order at the sync point itself (`>=`), then the cancelled one.
    assert_eq!(ids, [last.to_string(), first.to_string()]);
    assert_eq!(changed[1]["status"], "cancelled");
    assert!(changed[1]["cancelled_at"].is_string());
    // Filters: by status and by email (the dashboard's search).
    let only_cancelled = walk(&org, &fixture, "status=cancelled", async || {}).await;
    assert_eq!(only_cancelled.len(), 1);
    let by_email = walk(&org, &fixture, "email=B%40EXAMPLE", async || {}).await;
    assert_eq!(by_email.len(), 1);
    assert_eq!(by_email[0]["quantity"], 2);
    assert_eq!(by_email[0]["total_minor"], 5000);
    assert_eq!(by_email[0]["currency"], "EUR");
}

#[sqlx::test]
async fn two_concurrent_cancels_return_the_tickets_once(pool: PgPool) {
    let app = TestApp::spawn_for_bursts(pool.clone()).await;
    let org = app.organizer("cancel@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(1000, 4, 4)]).await;
    let tt = fixture.ticket_type_id();
    for round in 0..15 {
        let order = api_buy(&app, tt, 3, &format!("buyer{round}@example.org")).await;
        let path = format!("/api/v1/organizer/orders/{order}/cancel");
        let (a, b) = tokio::join!(
            send(&org, Method::POST, &path, None),
            send(&org, Method::POST, &path, None)
        );
        let mut statuses = [a.status(), b.status()];
        statuses.sort();
        assert_eq!(
            statuses,
            [StatusCode::OK, StatusCode::CONFLICT],
            "round {round}"
        );
        let loser = if a.status() == StatusCode::CONFLICT {
            a
        } else {
            b
        };
        assert_api_error(loser, StatusCode::CONFLICT, "already_cancelled", None).await;
        assert_eq!(order_status(&pool, order).await, "cancelled");
        // The stock from the table: every ticket back, once.
        assert_eq!(capacity_and_remaining(&pool, tt).await, (1000, 1000));
    }
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn stats_are_the_sums_of_the_orders_table(pool: PgPool) {
    let app = TestApp::spawn_for_bursts(pool.clone()).await;
    let org = app.organizer("stats@example.org").await;
    let fixture = owned_published_event(
        &org,
        &[TicketSpec::new(50, 4, 4), TicketSpec::new(20, 4, 4)],
    )
    .await;
    let [a, b] = fixture.ticket_type_ids[..] else {
        unreachable!()
    };
    // A price change after some sales: revenue counts each order's own price.
    for i in 0..5 {
        api_buy(&app, a, 1 + i % 3, &format!("a{i}@example.org")).await;
    }
    let event = event_path(&fixture);
    ok_json(
        send(
            &org,
            Method::PATCH,
            &format!("{event}/ticket-types/{a}"),
            Some(&json!({"price_minor": 3000})),
        )
        .await,
    )
    .await;
    api_buy(&app, a, 2, "late@example.org").await;
    let gone = api_buy(&app, b, 4, "gone@example.org").await;
    api_buy(&app, b, 1, "kept@example.org").await;
    ok_json(
        send(
            &org,
            Method::POST,
            &format!("/api/v1/organizer/orders/{gone}/cancel"),
            None,
        )
        .await,
    )
    .await;

    let stats = ok_json(send(&org, Method::GET, &format!("{event}/stats"), None).await).await;
    let from_table: HashMap<Uuid, (i64, i64, i32, i32)> = sqlx::query_as::<_, (Uuid, i64, i64, i32, i32)>(
        "SELECT t.id,
                COALESCE(SUM(o.quantity) FILTER (WHERE o.status = 'confirmed'), 0)::int8,
                COALESCE(SUM(o.quantity::int8 * o.unit_price_minor) FILTER (WHERE o.status = 'confirmed'), 0)::int8,
                t.capacity, t.remaining
         FROM ticket_types t LEFT JOIN orders o ON o.ticket_type_id = t.id
         WHERE t.event_id = $1 GROUP BY t.id",
    )
    .bind(fixture.event_id)
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(id, sold, revenue, capacity, remaining)| (id, (sold, revenue, capacity, remaining)))
    .collect();
    let mut total_sold = 0;
    let mut total_revenue = 0;
    for row in stats["ticket_types"].as_array().unwrap() {
        let id = Uuid::parse_str(row["id"].as_str().unwrap()).unwrap();
        let (sold, revenue, capacity, remaining) = from_table[&id];
        assert_eq!(row["sold"], sold, "{row}");
        assert_eq!(row["capacity"], capacity);
        assert_eq!(row["remaining"], remaining);
        assert_eq!(i64::from(capacity) - i64::from(remaining), sold);
        let revenue_sent: i64 = row["revenue"]
            .as_array()
            .unwrap()
            .iter()
            .inspect(|r| assert_eq!(r["currency"], "EUR"))
            .map(|r| r["amount_minor"].as_i64().unwrap())
            .sum();
        assert_eq!(revenue_sent, revenue, "{row}");
        total_sold += sold;
        total_revenue += revenue;
    }
    assert_eq!(stats["totals"]["sold"], total_sold);
    assert_eq!(
        stats["totals"]["revenue"],
        json!([{"currency": "EUR", "amount_minor": total_revenue}])
    );
    assert_eq!(from_table[&b].0, 1, "the cancelled order is not counted");

    // Per minute around now (the app's clock stands still in tests, so the
    // default range, the hour before it, would miss these sales): the same
    // tickets, every minute present.
    let rfc = |t: time::OffsetDateTime| {
        let text = t
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>()
    };
    let range = format!(
        "from={}&to={}",
        rfc(now() - time::Duration::minutes(30)),
        rfc(now() + time::Duration::minutes(30))
    );
    let series = ok_json(
        send(
            &org,
            Method::GET,
            &format!("{event}/stats/sales?{range}"),
            None,
        )
        .await,
    )
    .await;
    let minutes = series["minutes"].as_array().unwrap();
    assert!((60..=61).contains(&minutes.len()), "{}", minutes.len());
    let per_minute: i64 = minutes.iter().map(|m| m["tickets"].as_i64().unwrap()).sum();
    assert_eq!(per_minute, total_sold);
    // A range before the sales holds none.
    let earlier = ok_json(
        send(
            &org,
            Method::GET,
            &format!("{event}/stats/sales?from=2020-01-01T00:00:00Z&to=2020-01-01T00:10:00Z"),
            None,
        )
        .await,
    )
    .await;
    let minutes = earlier["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 10);
    assert_eq!(minutes[3]["at"], "2020-01-01T00:03:00Z");
    assert!(minutes.iter().all(|m| m["tickets"] == 0));
}

#[sqlx::test]
async fn the_rate_limit_answers_429_with_retry_after_past_the_budget(pool: PgPool) {
    let limits = stampede::web::Limits {
        api_requests_per_minute: 3,
        ..stampede::web::Limits::default()
    };
    let app = TestApp::spawn_with_limits(pool.clone(), limits).await;
    let org = app.organizer("busy@example.org").await;
    let other = app.organizer("calm@example.org").await;
    for _ in 0..3 {
        let resp = send(&org, Method::GET, "/api/v1/organizer/events", None).await;
        assert_eq!(resp.status(), StatusCode::OK);
    }
    let resp = send(&org, Method::GET, "/api/v1/organizer/events", None).await;
    let retry_after: u64 = resp
        .headers()
        .get("retry-after")
        .expect("a Retry-After")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    // One request per 20 s comes back: the wait is real, not a constant 1.
    assert!(
        (10..=20).contains(&retry_after),
        "Retry-After: {retry_after}"
    );
    assert_api_error(resp, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None).await;
    // Per account: another organizer has a budget of its own.
    let resp = send(&other, Method::GET, "/api/v1/organizer/events", None).await;
    assert_eq!(resp.status(), StatusCode::OK);
}

#[sqlx::test]
async fn the_rate_limit_counts_per_account_whichever_token_is_used(pool: PgPool) {
    let limits = stampede::web::Limits {
        api_requests_per_minute: 3,
        ..stampede::web::Limits::default()
    };
    let app = TestApp::spawn_with_limits(pool.clone(), limits).await;
    let org = app.organizer("many-tokens@example.org").await;
    let second = create_token_on_page(&org, "second").await;
    let with_second = || {
        app.client
            .get(app.url("/api/v1/organizer/events"))
            .bearer_auth(&second)
            .send()
    };
    for _ in 0..2 {
        let resp = send(&org, Method::GET, "/api/v1/organizer/events", None).await;
        assert_eq!(resp.status(), StatusCode::OK);
    }
    assert_eq!(with_second().await.unwrap().status(), StatusCode::OK);
    // The account's three requests are spent: the second token has no
    // budget of its own.
    let resp = with_second().await.unwrap();
    assert_api_error(resp, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None).await;
    let resp = send(&org, Method::GET, "/api/v1/organizer/events", None).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[sqlx::test]
async fn an_account_holds_at_most_ten_live_tokens_even_when_created_at_once(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("hoarder@example.org").await;
    let live_sql = format!(
        "SELECT count(*) FROM api_tokens WHERE organizer_id = '{}' AND revoked_at IS NULL",
        org.id
    );
    let live = || count(&pool, &live_sql);
    assert_eq!(live().await, 1, "app.organizer made one");
    // Thirty creations at once, as the attack did: ten live, no more.
    let names: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
    let answers = futures::future::join_all(names.iter().map(|name| async {
        org.post_form("/organizer/settings/tokens", &[("name", name)])
            .await
    }))
    .await;
    let made = answers
        .iter()
        .filter(|r| r.status() == StatusCode::OK)
        .count();
    assert_eq!(
        made,
        9,
        "statuses: {:?}",
        answers.iter().map(|r| r.status()).collect::<Vec<_>>()
    );
    assert!(
        answers
            .iter()
            .all(|r| r.status() == StatusCode::OK || r.status() == StatusCode::UNPROCESSABLE_ENTITY)
    );
    assert_eq!(live().await, 10);
    let refused = org
        .post_form("/organizer/settings/tokens", &[("name", "one more")])
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = refused.text().await.unwrap();
    assert!(page.contains("10 live API tokens"), "{page}");
    assert_eq!(live().await, 10);
    // Revoking one makes room again.
    let id: Uuid = sqlx::query_scalar(
        "SELECT id FROM api_tokens WHERE organizer_id = $1 AND name LIKE 't%' LIMIT 1",
    )
    .bind(org.id)
    .fetch_one(&pool)
    .await
    .unwrap();
    let resp = org
        .post_form(&format!("/organizer/settings/tokens/{id}/revoke"), &[])
        .await;
    assert!(resp.status().is_redirection(), "{}", resp.status());
    create_token_on_page(&org, "after a revoke").await;
    assert_eq!(live().await, 10);
}

#[sqlx::test]
async fn the_own_events_list_comes_a_page_at_a_time(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("pages@example.org").await;
    let other = app.organizer("elsewhere@example.org").await;
    let mut mine = BTreeSet::new();
    for _ in 0..5 {
        mine.insert(
            owned_published_event(&org, &[TicketSpec::new(5, 1, 1)])
                .await
                .event_id,
        );
    }
    owned_published_event(&other, &[TicketSpec::new(5, 1, 1)]).await;
    let mut seen = Vec::new();
    let mut after = String::new();
    let mut pages = 0;
    loop {
        let path = format!("/api/v1/organizer/events?limit=2&after={after}");
        let page = ok_json(send(&org, Method::GET, &path, None).await).await;
        pages += 1;
        for event in page["events"].as_array().unwrap() {
            seen.push(Uuid::parse_str(event["id"].as_str().unwrap()).unwrap());
        }
        match page["next"].as_str() {
            Some(next) => after = next.to_owned(),
            None => break,
        }
        assert!(pages < 10, "the walk did not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 5, "an event came twice");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), mine);
    for (query, field) in [
        ("limit=0", "limit"),
        ("after=junk", "after"),
        ("sort=id", "sort"),
    ] {
        let resp = send(
            &org,
            Method::GET,
            &format!("/api/v1/organizer/events?{query}"),
            None,
        )
        .await;
        assert_invalid(resp, field).await;
    }
}

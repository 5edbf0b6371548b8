//! Edits by the edit page's rules: capacities, limits, deleting a ticket type.

use super::*;

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

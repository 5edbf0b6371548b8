//! Cancelling an event, also while buyers race it.

use super::*;

#[sqlx::test]
async fn cancelling_an_event_cancels_every_order_returns_the_tickets_and_stops_sales(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("owner@example.org").await;
    let event =
        owned_published_event(&org, &[TicketSpec::new(10, 4, 4), TicketSpec::new(5, 2, 2)]).await;
    let other = owned_published_event(&org, &[TicketSpec::new(10, 4, 4)]).await;
    let [standing, seated] = event.ticket_type_ids[..] else {
        panic!("two ticket types")
    };
    let (a, a_secret) = api_buy_with_secret(&app, standing, 3, "ada@example.org").await;
    api_buy(&app, standing, 1, "ada@example.org").await;
    api_buy(&app, seated, 2, "bob@example.org").await;
    let (cancelled_before, secret) = api_buy_with_secret(&app, seated, 1, "cy@example.org").await;
    let resp = app
        .post_form(
            &format!("/orders/{cancelled_before}/cancel"),
            &[("s", &secret)],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let earlier_cancel = cancelled_at(&pool, cancelled_before).await;
    let untouched = api_buy(&app, other.ticket_type_id(), 2, "ada@example.org").await;
    assert_eq!(
        stock(&pool, event.event_id).await,
        vec![(standing, 10, 6, false), (seated, 5, 3, false)]
    );

    let page = format!("/organizer/events/{}", event.event_id);
    let resp = org.post_form(&format!("{page}/cancel"), &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), page);

    assert_eq!(event_status(&pool, event.event_id).await, "cancelled");
    assert_eq!(
        stock(&pool, event.event_id).await,
        vec![(standing, 10, 10, true), (seated, 5, 5, true)]
    );
    let orders: Vec<(Uuid, String, bool)> = sqlx::query_as(
        "SELECT o.id, o.status, o.cancelled_at IS NOT NULL FROM orders o
         JOIN ticket_types t ON t.id = o.ticket_type_id WHERE t.event_id = $1",
    )
    .bind(event.event_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(orders.len(), 4);
    for (id, status, stamped) in &orders {
        assert_eq!(
            (status.as_str(), *stamped),
            ("cancelled", true),
            "order {id}"
        );
    }
    let still = cancelled_at(&pool, cancelled_before).await;
    assert_eq!(
        still, earlier_cancel,
        "an already cancelled order was cancelled again"
    );
    let held: i64 = sqlx::query_scalar(
        "SELECT COALESCE(SUM(h.quantity), 0)::int8 FROM buyer_holdings h
         JOIN ticket_types t ON t.id = h.ticket_type_id WHERE t.event_id = $1",
    )
    .bind(event.event_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(held, 0);
    // Another event of the same organizer keeps its order.
    let status = order_status(&pool, untouched).await;
    assert_eq!(status, "confirmed");
    assert_invariants(&pool).await;

    // No more sales, through the API or the form.
    let resp = post_json(
        &app,
        "/api/v1/orders",
        &order_json(standing, 1, "late@example.org", "late-1-0123456789abcdef"),
    )
    .await;
    assert_api_error(resp, StatusCode::FORBIDDEN, "sale_closed", None).await;
    let tt = seated.to_string();
    let resp = post_buy_form(
        &app,
        event.event_id,
        &tt,
        "1",
        "late@example.org",
        "late-2-0123456789abcdef",
    )
    .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let body = resp.text().await.unwrap();
    assert!(body.contains("This event was cancelled."), "{body}");
    // Buyers see the cancellation, not a buy form; the event is not listed.
    let public = page_text(&app, &format!("/events/{}", event.event_id)).await;
    assert!(public.contains("This event was cancelled."), "{public}");
    assert!(!public.contains("idempotency_key"), "{public}");
    let listed = page_text(&app, "/api/v1/events").await;
    assert!(!listed.contains(&event.event_id.to_string()), "{listed}");
    let order_page = page_text(&app, &format!("/orders/{a}")).await;
    assert!(order_page.contains("Order cancelled"), "{order_page}");

    // Nothing brings it back or returns tickets twice: a second cancel, a
    // buyer's own cancel, publishing it again.
    let after = snapshot(&pool).await;
    let resp = org.post_form(&format!("{page}/cancel"), &[]).await;
    assert!(
        !resp.status().is_server_error(),
        "second cancel: {}",
        resp.status()
    );
    let resp = app
        .post_form(&format!("/orders/{a}/cancel"), &[("s", &a_secret)])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let resp = org.post_form(&format!("{page}/publish"), &[]).await;
    assert!(
        resp.status().is_client_error(),
        "publishing a cancelled event: {}",
        resp.status()
    );
    assert_eq!(snapshot(&pool).await, after);
    assert_eq!(org.get(&page).await.status(), StatusCode::OK);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn two_hundred_buyers_racing_the_owner_cancelling_the_event_leave_no_confirmed_order(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    // Three pools, so that purchases queued on a row lock cannot starve the
    // app (the owner's cancel) or the test's own lock and watch.
    let pool = pool(connect.clone(), 32).await;
    let control = common::pool(connect.clone(), 4).await;
    let app = TestApp::spawn(common::pool(connect, 8).await).await;
    let org = app.organizer("owner@example.org").await;
    let event = owned_published_event(
        &org,
        &[TicketSpec::new(120, 2, 2), TicketSpec::new(40, 2, 2)],
    )
    .await;
    let buyers = 200;
    let now = now();
    let request = |i: usize, key: String| PurchaseRequest {
        event_id: Some(event.event_id.into()),
        ticket_type_id: event.ticket_type_ids[i % 2].into(),
        quantity: Quantity::new(1 + (i as i64 / 2) % 2).unwrap(),
        email: Email::parse(&format!("buyer{i}@example.org")).unwrap(),
        idempotency_key: IdempotencyKey::parse(&key).unwrap(),
        pass: None,
        queue_entry: None,
        presale_code: None,
        client: None,
    };
    // Orders to cancel: ten sold before the rush, to buyers not in it.
    let early = 10;
    for i in 1000..1000 + early {
        let sold = sale::purchase(
            &pool,
            now,
            &request(i, format!("early-{i}-0123456789abcdef")),
        )
        .await;
        assert!(matches!(sold, Ok(Purchase::Created { .. })), "{sold:?}");
    }
    // The overlap, made certain: the first ticket type's row is held, so its
    // purchases queue on their stock UPDATE; the owner's cancel queues behind
    // them on the same row; then the row is released.
    let hold = locks::hold_ticket_type(&control, event.ticket_type_ids[0]).await;

    let barrier = Arc::new(Barrier::new(buyers));
    let tasks: Vec<_> = (0..buyers)
        .map(|i| {
            let request = request(i, format!("race-{i}-0123456789abcdef"));
            let (pool, barrier) = (pool.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                sale::purchase(&pool, now, &request).await
            })
        })
        .collect();
    // Purchases queue on the held row first; only then does the owner cancel.
    locks::wait_until_blocked(&control, "UPDATE ticket_types", 1).await;
    let page = format!("/organizer/events/{}", event.event_id);
    let cancel = {
        let (client, url) = (org.client.clone(), org.url(&format!("{page}/cancel")));
        let body = with_csrf(&[], &org.csrf);
        tokio::spawn(async move {
            client
                .post(url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await
                .unwrap()
        })
    };
    // The cancel waits on the same row (its trigger halts the ticket types),
    // behind purchases that started before it and have not finished.
    locks::wait_until_blocked(&control, "UPDATE events", 1).await;
    let in_flight = locks::blocked(&control, "UPDATE ticket_types").await.len();
    hold.tx.commit().await.unwrap();
    assert!(
        in_flight >= 1,
        "no purchase was in flight while the owner cancelled"
    );
    let early = early as i64;

    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let mut created = 0;
    let mut refusals = std::collections::BTreeMap::<&str, usize>::new();
    for result in results {
        match result {
            Ok(Purchase::Created { .. }) => created += 1,
            Ok(Purchase::Replayed(order)) => panic!("a fresh key was replayed: {order:?}"),
            Err(
                err
                @ (AppError::SoldOut | AppError::NotEnoughLeft { .. } | AppError::SaleClosed(_)),
            ) => *refusals.entry(err.code()).or_default() += 1,
            Err(err) => panic!("a buyer got {} ({err:?})", err.code()),
        }
    }
    let resp = cancel.await.unwrap();
    eprintln!(
        "{in_flight} purchases in flight when the owner cancelled; sold {created} in the race; refused {refusals:?}"
    );
    assert_eq!(resp.status(), StatusCode::SEE_OTHER, "the owner's cancel");
    assert_eq!(location(&resp), page);

    assert_eq!(event_status(&pool, event.event_id).await, "cancelled");
    let confirmed = count(
        &pool,
        "SELECT count(*) FROM orders WHERE status = 'confirmed'",
    )
    .await;
    assert_eq!(
        confirmed, 0,
        "{confirmed} orders outlived the cancel ({created} sold, refusals {refusals:?})"
    );
    let cancelled = count(
        &pool,
        "SELECT count(*) FROM orders WHERE status = 'cancelled'",
    )
    .await;
    assert_eq!(
        cancelled,
        early + created as i64,
        "every sold order is cancelled"
    );
    for (id, capacity, remaining, halted) in stock(&pool, event.event_id).await {
        assert_eq!(remaining, capacity, "ticket type {id}");
        assert!(halted, "ticket type {id} still on sale");
    }
    let holdings: i64 = count(
        &pool,
        "SELECT count(*) FROM buyer_holdings WHERE quantity <> 0",
    )
    .await;
    assert_eq!(holdings, 0, "buyer holdings left after the cancel");
    assert_invariants(&pool).await;
    // Let sqlx::test drop the database: no connection may stay open.
    pool.close().await;
    control.close().await;
    app.pool.close().await;
}

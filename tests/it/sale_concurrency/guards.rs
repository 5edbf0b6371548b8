//! What is refused before any write: outside the sale window, over the per-order maximum, and negative stock even without the application.

use super::*;

#[sqlx::test]
async fn purchases_outside_the_sale_window_are_refused_and_write_nothing(pool: PgPool) {
    let t0 = now();
    let specs = [TicketSpec::new(10, 4, 4)];
    let future =
        common::event_with_window(&pool, t0 + Span::hours(1), None, "published", &specs).await;
    let closed = common::event_with_window(
        &pool,
        t0 - Span::hours(2),
        Some(t0 - Span::hours(1)),
        "published",
        &specs,
    )
    .await;
    let draft = common::event_with_window(&pool, t0 - Span::hours(1), None, "draft", &specs).await;

    let attempt = |tt: Uuid, at| {
        let pool = pool.clone();
        async move { sale::purchase(&pool, at, &request(tt, 1, "ada@example.org", &fresh_key())).await }
    };
    assert!(matches!(
        attempt(future.ticket_type_id(), t0).await,
        Err(AppError::SaleNotOpen { .. })
    ));
    assert!(matches!(
        attempt(closed.ticket_type_id(), t0).await,
        Err(AppError::SaleClosed(_))
    ));
    assert!(matches!(
        attempt(draft.ticket_type_id(), t0).await,
        Err(AppError::NotFound)
    ));
    assert!(matches!(
        attempt(Uuid::new_v4(), t0).await,
        Err(AppError::NotFound)
    ));
    assert_eq!(order_count(&pool).await, 0);
    assert_invariants(&pool).await;

    // The injected clock decides: the same request succeeds once the sale opens.
    let opened = attempt(future.ticket_type_id(), t0 + Span::hours(1)).await;
    assert!(matches!(opened, Ok(Purchase::Created { .. })), "{opened:?}");
    // And the closing instant itself is already closed.
    let at_close = attempt(closed.ticket_type_id(), t0 - Span::hours(1)).await;
    assert!(
        matches!(at_close, Err(AppError::SaleClosed(_))),
        "{at_close:?}"
    );
}

#[sqlx::test]
async fn more_than_the_per_order_maximum_is_refused_before_any_write(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 6)]).await;
    let result = buy_now(&pool, fixture.ticket_type_id(), 3, "ada@example.org").await;
    assert!(
        matches!(result, Err(AppError::OrderLimit { max: 2 })),
        "{result:?}"
    );
    assert_eq!(order_count(&pool).await, 0);
    let holdings: i64 = sqlx::query_scalar("SELECT count(*) FROM buyer_holdings")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(holdings, 0);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn the_database_refuses_negative_stock_even_without_the_application(pool: PgPool) {
    let fixture = published_event(&pool, &[TicketSpec::new(3, 3, 3)]).await;
    let err = sqlx::query("UPDATE ticket_types SET remaining = remaining - 4 WHERE id = $1")
        .bind(fixture.ticket_type_id())
        .execute(&pool)
        .await
        .unwrap_err();
    let constraint = violated_constraint(&err);
    assert_eq!(
        constraint.as_deref(),
        Some("ticket_types_remaining_non_negative")
    );
    let err = sqlx::query(
        "INSERT INTO orders (ticket_type_id, email, quantity, idempotency_key, unit_price_minor, currency)
         VALUES ($1, 'ada@example.org', 0, 'k', 0, 'EUR')",
    )
    .bind(fixture.ticket_type_id())
    .execute(&pool)
    .await
    .unwrap_err();
    let constraint = violated_constraint(&err);
    assert_eq!(constraint.as_deref(), Some("orders_quantity_positive"));
}

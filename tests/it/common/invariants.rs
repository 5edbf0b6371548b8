//! The sale invariants, checked from the tables.

use super::*;

/// The sale invariants, from the tables, for every ticket type (see
/// docs/development.md): stock adds up, no limit is exceeded, one order per key.
/// Returns the number of tickets sold per ticket type, in id order.
pub async fn assert_invariants(pool: &PgPool) -> Vec<(Uuid, i64)> {
    let rows: Vec<(Uuid, i32, i32, i32, i32, i64)> = sqlx::query_as(
        "SELECT t.id, t.capacity, t.remaining, t.max_per_order, t.max_per_buyer,
                COALESCE((SELECT SUM(o.quantity) FROM orders o
                          WHERE o.ticket_type_id = t.id AND o.status IN ('held', 'confirmed')), 0)::int8
         FROM ticket_types t ORDER BY t.id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut sold = Vec::new();
    for (id, capacity, remaining, max_per_order, max_per_buyer, live) in rows {
        assert!(
            remaining >= 0,
            "ticket type {id}: remaining {remaining} < 0"
        );
        assert_eq!(
            i64::from(capacity),
            i64::from(remaining) + live,
            "ticket type {id}: capacity != remaining + sold"
        );
        let over_order: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM orders WHERE ticket_type_id = $1 AND quantity > $2",
        )
        .bind(id)
        .bind(max_per_order)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(
            over_order, 0,
            "ticket type {id}: an order above max_per_order"
        );
        // Buyers are counted by their folded key (orders from before keys
        // existed: by their email).
        let over_buyer: Vec<(String, i64)> = sqlx::query_as(
            "SELECT COALESCE(buyer_key, email), SUM(quantity)::int8 FROM orders
             WHERE ticket_type_id = $1 AND status IN ('held', 'confirmed')
             GROUP BY COALESCE(buyer_key, email) HAVING SUM(quantity) > $2",
        )
        .bind(id)
        .bind(max_per_buyer)
        .fetch_all(pool)
        .await
        .unwrap();
        assert!(
            over_buyer.is_empty(),
            "ticket type {id}: buyers above the limit: {over_buyer:?}"
        );
        // The per-buyer bookkeeping agrees with the orders it summarises.
        let drift: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT COALESCE(h.buyer_key, o.buyer_key), COALESCE(h.quantity, 0)::int8,
                    COALESCE(o.live, 0)::int8
             FROM (SELECT buyer_key, quantity FROM buyer_holdings WHERE ticket_type_id = $1) h
             FULL JOIN (SELECT COALESCE(buyer_key, email) AS buyer_key, SUM(quantity) AS live
                        FROM orders WHERE ticket_type_id = $1 AND status IN ('held', 'confirmed')
                        GROUP BY COALESCE(buyer_key, email)) o
               ON o.buyer_key = h.buyer_key
             WHERE COALESCE(h.quantity, 0) <> COALESCE(o.live, 0)",
        )
        .bind(id)
        .fetch_all(pool)
        .await
        .unwrap();
        assert!(
            drift.is_empty(),
            "ticket type {id}: buyer_holdings drifted: {drift:?}"
        );
        sold.push((id, live));
    }
    // Per event, across its ticket types: the optional limit per buyer key
    // holds, and the bookkeeping agrees with the orders.
    let over_event: Vec<(Uuid, String, i64)> = sqlx::query_as(
        "SELECT t.event_id, COALESCE(o.buyer_key, o.email), SUM(o.quantity)::int8
         FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
         JOIN events e ON e.id = t.event_id
         WHERE o.status IN ('held', 'confirmed') AND e.max_per_buyer IS NOT NULL
         GROUP BY t.event_id, COALESCE(o.buyer_key, o.email), e.max_per_buyer
         HAVING SUM(o.quantity) > e.max_per_buyer",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        over_event.is_empty(),
        "buyers above an event's limit: {over_event:?}"
    );
    let event_drift: Vec<(Uuid, String, i64, i64)> = sqlx::query_as(
        "SELECT COALESCE(h.event_id, o.event_id), COALESCE(h.buyer_key, o.buyer_key),
                COALESCE(h.quantity, 0)::int8, COALESCE(o.live, 0)::int8
         FROM event_buyer_holdings h
         FULL JOIN (SELECT t.event_id, COALESCE(o.buyer_key, o.email) AS buyer_key,
                           SUM(o.quantity) AS live
                    FROM orders o JOIN ticket_types t ON t.id = o.ticket_type_id
                    WHERE o.status IN ('held', 'confirmed')
                    GROUP BY t.event_id, COALESCE(o.buyer_key, o.email)) o
           ON o.event_id = h.event_id AND o.buyer_key = h.buyer_key
         WHERE COALESCE(h.quantity, 0) <> COALESCE(o.live, 0)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        event_drift.is_empty(),
        "event_buyer_holdings drifted: {event_drift:?}"
    );
    // No row of the sale's tables outlives its parent: their foreign keys
    // are checked per statement by triggers
    // (migrations/0028_foreign_keys_per_statement.sql), not per row.
    let orphans: Vec<(String, i64)> = sqlx::query_as(
        "SELECT child, n FROM (
             SELECT 'orders' AS child, count(*) AS n FROM orders o
             WHERE NOT EXISTS (SELECT 1 FROM ticket_types t WHERE t.id = o.ticket_type_id)
             UNION ALL
             SELECT 'tickets', count(*) FROM tickets k
             WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = k.order_id)
             UNION ALL
             SELECT 'buyer_holdings', count(*) FROM buyer_holdings h
             WHERE NOT EXISTS (SELECT 1 FROM ticket_types t WHERE t.id = h.ticket_type_id)
             UNION ALL
             SELECT 'event_buyer_holdings', count(*) FROM event_buyer_holdings h
             WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = h.event_id)) c
         WHERE n > 0",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(orphans.is_empty(), "rows without their parent: {orphans:?}");
    // Tickets exist for confirmed orders only, one per seat: a hold gets
    // none until its buyer confirms, and an expired hold never does.
    let wrong_tickets: Vec<(Uuid, String, i32, i64)> = sqlx::query_as(
        "SELECT o.id, o.status, o.quantity,
                (SELECT count(*) FROM tickets k WHERE k.order_id = o.id)
         FROM orders o
         WHERE ((o.status = 'held' OR o.cancel_reason = 'expired')
                AND EXISTS (SELECT 1 FROM tickets k WHERE k.order_id = o.id))
            OR (o.status = 'confirmed'
                AND (SELECT count(*) FROM tickets k WHERE k.order_id = o.id) <> o.quantity)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        wrong_tickets.is_empty(),
        "orders with the wrong tickets: {wrong_tickets:?}"
    );
    // Each presale code's uses are the tickets of its live orders.
    let code_drift: Vec<(String, i32, i64)> = sqlx::query_as(
        "SELECT c.code, c.used,
                (SELECT coalesce(sum(o.quantity), 0) FROM orders o
                 WHERE o.presale_code_id = c.id AND o.status IN ('held', 'confirmed'))::int8
         FROM presale_codes c
         WHERE c.used <> (SELECT coalesce(sum(o.quantity), 0) FROM orders o
                          WHERE o.presale_code_id = c.id AND o.status IN ('held', 'confirmed'))",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        code_drift.is_empty(),
        "presale codes whose uses drifted: {code_drift:?}"
    );
    // A waiting list offer is one order, for its own buyer and ticket type,
    // and made only to a place that was in line (confirmed, with a position).
    let bad_offers: Vec<(Uuid, Option<Uuid>)> = sqlx::query_as(
        "SELECT w.id, w.order_id FROM waitlist_entries w
         LEFT JOIN orders o ON o.id = w.order_id
         WHERE (w.status = 'offered'
                AND (o.id IS NULL OR o.buyer_key <> w.buyer_key
                     OR o.ticket_type_id <> w.ticket_type_id OR w.position IS NULL
                     OR o.quantity > w.quantity OR o.confirm_token_hash <> w.token_hash))
            OR (w.status <> 'offered' AND w.order_id IS NOT NULL)
            OR w.order_id IN (SELECT order_id FROM waitlist_entries
                              GROUP BY order_id HAVING count(*) > 1)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        bad_offers.is_empty(),
        "waiting list offers that do not match their orders: {bad_offers:?}"
    );
    let duplicate_keys: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT 1 FROM orders GROUP BY email, idempotency_key HAVING count(*) > 1) d",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        duplicate_keys, 0,
        "an idempotency key maps to more than one order"
    );
    sold
}

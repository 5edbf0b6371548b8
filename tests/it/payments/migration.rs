//! Migration 0024: prices stored before it in hundredths of every currency
//! are moved to each currency's own minor unit.

use std::borrow::Cow;

use sqlx::PgPool;

#[sqlx::test(migrations = false)]
async fn old_yen_and_dinar_prices_keep_their_value(pool: PgPool) {
    let full = sqlx::migrate!();
    let mut before = sqlx::migrate!();
    before.migrations = Cow::Owned(
        full.migrations
            .iter()
            .filter(|m| m.version < 24)
            .cloned()
            .collect(),
    );
    before.run(&pool).await.unwrap();
    // 2500 JPY, 12.50 KWD and 25.00 EUR as the old forms stored them.
    sqlx::raw_sql(
        "INSERT INTO organizers (id, email, password_hash)
         VALUES ('00000000-0000-0000-0000-00000000000a', 'o@example.org', 'x');
         INSERT INTO events (id, organizer_id, title, venue, starts_at, sale_opens_at, status)
         VALUES ('00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-00000000000a',
                 'Old', 'Hall', now() + interval '1 day', now(), 'published');
         INSERT INTO ticket_types (event_id, name, price_minor, currency, capacity, remaining,
                                   max_per_order, max_per_buyer)
         VALUES ('00000000-0000-0000-0000-0000000000e1', 'yen', 250000, 'JPY', 5, 5, 1, 1),
                ('00000000-0000-0000-0000-0000000000e1', 'dinar', 1250, 'KWD', 5, 5, 1, 1),
                ('00000000-0000-0000-0000-0000000000e1', 'euro', 2500, 'EUR', 5, 5, 1, 1);",
    )
    .execute(&pool)
    .await
    .unwrap();
    full.run(&pool).await.unwrap();
    let prices: Vec<(String, i64)> =
        sqlx::query_as("SELECT name, price_minor FROM ticket_types ORDER BY name")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        prices,
        [
            ("dinar".to_owned(), 12_500),
            ("euro".to_owned(), 2500),
            ("yen".to_owned(), 2500)
        ]
    );
}

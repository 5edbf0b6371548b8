//! The buy form refusing what it must, with the reason and nothing written.

use reqwest::StatusCode;
use sqlx::PgPool;
use time::{Duration as Span, OffsetDateTime};
use uuid::Uuid;

use crate::{
    common::{forms::*, organizer::*, *},
    http::support::*,
};

#[sqlx::test]
async fn buy_form_with_missing_fields_comes_back_with_the_error_and_nothing_is_written(
    pool: PgPool,
) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let tt = fixture.ticket_type_id().to_string();
    let key = Uuid::new_v4().to_string();
    let path = format!("/events/{}/orders", fixture.event_id);
    let all = [
        ("ticket_type_id", tt.as_str()),
        ("quantity", "2"),
        ("email", "missing@example.org"),
        ("idempotency_key", key.as_str()),
    ];
    let cases = [
        ("ticket_type_id", "Choose a ticket type."),
        ("quantity", "Choose how many tickets you want."),
        ("email", "Enter your email address."),
        ("idempotency_key", "An idempotency key is required"),
    ];
    for (missing, message) in cases {
        let fields: Vec<_> = all
            .iter()
            .copied()
            .filter(|(name, _)| *name != missing)
            .collect();
        let resp = post_form(&app, &path, &fields).await;
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "without {missing}"
        );
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "without {missing}: {body}");
        assert!(body.contains("role=\"alert\""), "without {missing}: {body}");
        // The form comes back, filled in with what was sent.
        assert!(body.contains("Buy tickets"), "without {missing}: {body}");
        if missing != "email" {
            assert!(
                body.contains("value=\"missing@example.org\""),
                "without {missing}: {body}"
            );
        }
        // A fresh key replaces a missing one, so the next try can succeed.
        Uuid::parse_str(&idempotency_key_in(&body)).unwrap();
    }

    // Nothing at all.
    let resp = post_raw_form(&app, &path, String::new()).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);

    assert_books(&pool, fixture.ticket_type_id(), 0, 10).await;
}

#[sqlx::test]
async fn buy_form_refuses_out_of_range_and_non_numeric_quantities(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(1000, 100, 100)]).await;
    let cases = [
        ("0", "Choose at least 1 ticket."),
        ("-1", "Choose at least 1 ticket."),
        ("101", "At most 100 tickets fit in one order."),
        (
            "99999999999999999999",
            "At most 100 tickets fit in one order.",
        ),
        ("abc", "&quot;abc&quot; is not a whole number of tickets."),
        ("1.5", "&quot;1.5&quot; is not a whole number of tickets."),
        ("1e3", "&quot;1e3&quot; is not a whole number of tickets."),
    ];
    for (quantity, message) in cases {
        let key = Uuid::new_v4().to_string();
        let resp = buy_on_page(&app, &fixture, quantity, "typed@example.org", key.as_str()).await;
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "quantity {quantity}"
        );
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "quantity {quantity}: {body}");
        assert!(
            body.contains("value=\"typed@example.org\""),
            "quantity {quantity}: {body}"
        );
        assert!(
            body.contains(&format!("value=\"{quantity}\"")),
            "quantity {quantity}: {body}"
        );
        assert!(
            body.contains("aria-invalid=\"true\""),
            "quantity {quantity}: {body}"
        );
        // The same key comes back, so a corrected resubmission stays idempotent.
        assert_eq!(idempotency_key_in(&body), key);
    }
    assert_books(&pool, fixture.ticket_type_id(), 0, 1000).await;
}

#[sqlx::test]
async fn buy_form_refuses_malformed_emails_and_keeps_what_was_typed(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let cases = [
        ("ada", "&quot;ada&quot; is not a valid email address."),
        ("ada@", "&quot;ada@&quot; is not a valid email address."),
        (
            "ada@example",
            "&quot;ada@example&quot; is not a valid email address.",
        ),
        ("", "Enter your email address."),
        ("   ", "Enter your email address."),
    ];
    for (email, message) in cases {
        let key = Uuid::new_v4().to_string();
        let resp = buy_on_page(&app, &fixture, "3", email, key.as_str()).await;
        assert_eq!(
            resp.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "email {email:?}"
        );
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "email {email:?}: {body}");
        assert!(
            body.contains(&format!(
                "name=\"email\" autocomplete=\"email\" required value=\"{email}\""
            )),
            "email {email:?}: {body}"
        );
        assert!(body.contains("value=\"3\""), "email {email:?}: {body}");
    }
    assert_eq!(order_count(&pool).await, 0);
}

#[sqlx::test]
async fn buy_form_escapes_what_was_typed_when_it_comes_back(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let tt = fixture.ticket_type_id().to_string();
    let resp = post_buy_form(
        &app,
        fixture.event_id,
        &tt,
        "1",
        "\"><script>alert(1)</script>",
        "k-1",
    )
    .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = resp.text().await.unwrap();
    assert!(!body.contains("<script>alert(1)</script>"), "{body}");
    assert!(
        body.contains("&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{body}"
    );
    assert_eq!(order_count(&pool).await, 0);
}

#[sqlx::test]
async fn buy_form_with_an_unknown_ticket_type_is_not_found(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let unknown = Uuid::new_v4().to_string();
    let resp = post_buy_form(
        &app,
        fixture.event_id,
        &unknown,
        "1",
        "lost@example.org",
        "key-unknown-type-0123456789abcdef",
    )
    .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body = resp.text().await.unwrap();
    assert!(body.contains("We could not find that."), "{body}");
    assert!(body.contains("value=\"lost@example.org\""), "{body}");

    // An id that is not a UUID at all is an invalid field, not a lookup.
    let resp = post_buy_form(
        &app,
        fixture.event_id,
        "standing",
        "1",
        "lost@example.org",
        "key-unknown-type-0123456789abcdef",
    )
    .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(resp.text().await.unwrap().contains("Choose a ticket type."));

    // Buying on an event that does not exist.
    let tt = fixture.ticket_type_id().to_string();
    let resp = post_form(
        &app,
        "/events/not-an-id/orders",
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "1"),
            ("email", "lost@example.org"),
            ("idempotency_key", "key-no-event-0123456789abcdef"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(order_count(&pool).await, 0);
}

#[sqlx::test]
async fn buy_form_for_a_ticket_type_of_another_event_is_refused(pool: PgPool) {
    let shown = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let other = published_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let tt = other.ticket_type_id().to_string();
    let resp = post_buy_form(
        &app,
        shown.event_id,
        &tt,
        "1",
        "mixed@example.org",
        "key-mixed-0123456789abcdef",
    )
    .await;
    // The URL names the event being bought; a ticket type of another event
    // does not exist on it.
    assert_eq!(
        resp.status(),
        StatusCode::NOT_FOUND,
        "Location: {:?}",
        resp.headers().get("location")
    );
    assert_books(&pool, other.ticket_type_id(), 0, 10).await;
}

#[sqlx::test]
async fn buy_form_over_the_per_order_limit_or_the_stock_is_a_conflict(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(3, 4, 4)]).await;
    let cases = [
        ("5", "At most 4 tickets of this type fit in one order."),
        ("4", "Only 3 left of this ticket type; choose fewer."),
    ];
    for (quantity, message) in cases {
        let resp = buy_on_page(
            &app,
            &fixture,
            quantity,
            "greedy@example.org",
            "key-greedy-0123456789abcdef",
        )
        .await;
        assert_eq!(resp.status(), StatusCode::CONFLICT, "quantity {quantity}");
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "quantity {quantity}: {body}");
        assert!(
            body.contains("value=\"greedy@example.org\""),
            "quantity {quantity}: {body}"
        );
        assert!(
            body.contains(&format!("value=\"{quantity}\"")),
            "quantity {quantity}: {body}"
        );
        assert_eq!(idempotency_key_in(&body), "key-greedy-0123456789abcdef");
    }
    assert_books(&pool, fixture.ticket_type_id(), 0, 3).await;

    // The same key with a quantity that fits now succeeds: refusals wrote nothing.
    let resp = buy_on_page(
        &app,
        &fixture,
        "3",
        "greedy@example.org",
        "key-greedy-0123456789abcdef",
    )
    .await;
    order_id_from_redirect(&resp);
    assert_eq!(remaining(&pool, fixture.ticket_type_id()).await, 0);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn buy_form_over_the_buyer_limit_is_a_conflict(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(20, 2, 3)]).await;
    api_buy(&app, fixture.ticket_type_id(), 2, "fan@example.org").await;
    let resp = buy_on_page(
        &app,
        &fixture,
        "2",
        "FAN@example.org",
        "key-second-0123456789abcdef",
    )
    .await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(
            "Each buyer may hold at most 3 tickets of this type; this purchase would go beyond that."
        ),
        "{body}"
    );
    assert_books(&pool, fixture.ticket_type_id(), 1, 18).await;
}

#[sqlx::test]
async fn buy_form_before_the_sale_opens_is_forbidden(pool: PgPool) {
    let opens = OffsetDateTime::now_utc() + Span::days(1);
    let (app, fixture) = app_with_window(&pool, opens, None, &[TicketSpec::new(10, 4, 4)]).await;
    let resp = buy_on_page(
        &app,
        &fixture,
        "1",
        "early@example.org",
        "key-early-0123456789abcdef",
    )
    .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(&format!(
            "The sale has not opened yet; it opens at {}.",
            shown_time(opens)
        )),
        "{body}"
    );
    assert!(!body.contains("Buy tickets"), "{body}");
    assert_books(&pool, fixture.ticket_type_id(), 0, 10).await;
}

#[sqlx::test]
async fn buy_form_on_a_draft_event_is_not_found(pool: PgPool) {
    let opened = opened();
    let fixture =
        event_with_window(&pool, opened, None, "draft", &[TicketSpec::new(10, 4, 4)]).await;
    let app = TestApp::spawn(pool.clone()).await;
    let resp = buy_on_page(
        &app,
        &fixture,
        "1",
        "sneaky@example.org",
        "key-draft-0123456789abcdef",
    )
    .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_books(&pool, fixture.ticket_type_id(), 0, 10).await;
}

#[sqlx::test]
async fn buy_form_body_over_64_kib_is_refused_with_413(pool: PgPool) {
    let (app, fixture) = app_with_event(&pool, &[TicketSpec::new(10, 4, 4)]).await;
    let tt = fixture.ticket_type_id().to_string();
    let padding = "x".repeat(64 * 1024);
    let resp = post_form(
        &app,
        &format!("/events/{}/orders", fixture.event_id),
        &[
            ("ticket_type_id", tt.as_str()),
            ("quantity", "1"),
            ("email", "big@example.org"),
            ("idempotency_key", "key-big-0123456789abcdef"),
            ("padding", padding.as_str()),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("The request body is too large.")
    );
    assert_books(&pool, fixture.ticket_type_id(), 0, 10).await;
}

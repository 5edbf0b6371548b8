//! The door's page through a staff link.

use super::*;

#[sqlx::test]
async fn a_staff_link_lets_a_door_redeem_each_code_once_and_a_resubmit_gets_the_first_answer(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("door@example.org").await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let codes = bought_codes(&app, event.ticket_type_id(), 2, "guest@example.org").await;
    let now = app.clock.now();

    // The dashboard shows the new link once; the table keeps its hash only.
    let secret = door_link(&org, event.event_id, "North gate", now).await;
    let dashboard = page(
        org.get(&format!("/organizer/events/{}", event.event_id))
            .await,
    )
    .await;
    assert!(
        !dashboard.contains(&secret),
        "the secret is shown only once"
    );
    assert!(dashboard.contains("North gate"));
    let stored: Vec<u8> = sqlx::query_scalar("SELECT secret_hash FROM door_links")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, Sha256::digest(secret.as_bytes()).to_vec());

    // No account: the link alone opens the scanner. Its secret goes into
    // a cookie for `/door` at once, and the scanner's own address and page
    // carry it nowhere (proxies log query strings).
    let link = app
        .client
        .get(app.url(&format!("/door?s={secret}")))
        .send()
        .await
        .unwrap();
    assert_eq!(link.status(), StatusCode::SEE_OTHER);
    assert_eq!(link.headers()["location"], "/door");
    let cookie = link.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.starts_with(&format!("stampede_door={secret};")),
        "{cookie}"
    );
    for attribute in ["Path=/door", "HttpOnly", "SameSite=Lax"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let scanner = page(
        app.client
            .get(app.url("/door"))
            .header("cookie", format!("stampede_door={secret}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(scanner.contains("Door: North gate"), "{scanner}");
    assert!(!scanner.contains(&secret), "the page carries the secret");
    assert_eq!(result_on_page(&scanner), None);
    // A scanner page from before the cookie (the secret in its form) still scans.
    let old_form = app
        .post_form(
            "/door",
            &[("s", &secret), ("code", "NOSUCHCODE"), ("nonce", &nonce())],
        )
        .await;
    assert_eq!(old_form.status(), StatusCode::OK);

    let first = nonce();
    let ok = page(door_scan(&app, &secret, &codes[0], &first).await).await;
    assert_eq!(result_on_page(&ok).as_deref(), Some("ok"));
    assert!(
        ok.contains("General admission 0"),
        "the ticket type is shown"
    );
    let (at, door) = redeemed(&pool, &codes[0]).await;
    assert_eq!(door.as_deref(), Some("North gate"));
    assert_eq!(at.unwrap().unix_timestamp(), now.unix_timestamp());

    // Scanned again: red, with when and where it was let in.
    let again = page(door_scan(&app, &secret, &codes[0], &nonce()).await).await;
    assert_eq!(result_on_page(&again).as_deref(), Some("already_redeemed"));
    assert!(again.contains("at North gate"), "{again}");

    // The same form submitted twice (same nonce): the first answer again.
    let resubmit = page(door_scan(&app, &secret, &codes[0], &first).await).await;
    assert_eq!(result_on_page(&resubmit).as_deref(), Some("ok"));

    // Codes as printed (grouped, any case) are the same code.
    let grouped = codes[1]
        .to_lowercase()
        .as_bytes()
        .chunks(4)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(" ");
    let ok = page(door_scan(&app, &secret, &grouped, &nonce()).await).await;
    assert_eq!(result_on_page(&ok).as_deref(), Some("ok"));
    let unknown = page(door_scan(&app, &secret, "NOSUCHCODE", &nonce()).await).await;
    assert_eq!(result_on_page(&unknown).as_deref(), Some("unknown"));
    let scans = scan_count(&pool).await;

    // A blank code comes back with the field named; nothing is recorded.
    let blank = door_scan(&app, &secret, "  ", &nonce()).await;
    assert_eq!(blank.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let blank = blank.text().await.unwrap();
    assert!(blank.contains("aria-invalid=\"true\""), "{blank}");
    // A nonce reused for another code is refused, the form kept.
    let reused = door_scan(&app, &secret, "OTHERCODE", &first).await;
    assert_eq!(reused.status(), StatusCode::CONFLICT);
    assert!(reused.text().await.unwrap().contains("value=\"OTHERCODE\""));
    assert_eq!(scan_count(&pool).await, scans);
    assert_eq!(redeemed_count(&pool).await, 2);

    // The scanner's form carries the CSRF field like every other form.
    let forged = app
        .client
        .post(app.url("/door"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(forms::urlencoded(&[
            ("s", &secret),
            ("code", &codes[0]),
            ("nonce", &nonce()),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
}

#[sqlx::test]
async fn a_staff_link_form_with_a_bad_field_comes_back_filled_in_and_writes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("forms@example.org").await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let now = app.clock.now();
    let resp = post_door_link(&org, event.event_id, "Back door", now, now - Span::hours(1)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = resp.text().await.unwrap();
    assert!(body.contains("value=\"Back door\""), "{body}");
    assert!(body.contains("id=\"valid_until\""), "{body}");
    let resp = post_door_link(&org, event.event_id, "a\u{1}b", now, now + Span::hours(1)).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(count(&pool, "SELECT count(*) FROM door_links").await, 0);
}

//! A buyer through the pages and the mailed confirmation.

use super::*;

#[sqlx::test]
async fn a_buyer_joins_from_the_page_confirms_by_mail_and_gets_the_returned_ticket(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let fixture = published_event(&pool, &[TicketSpec::new(1, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    let event_id = fixture.event_id;
    let sink = Sink::start().await;
    let key = ConfirmKey::random();
    let clock = ManualClock::new(now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_confirm_key(key.clone());
    let app = TestApp::spawn_state(pool.clone(), clock, state).await;
    let settings = MailSettings::new(
        Some(sink.url()),
        "Stampede <tickets@example.org>",
        "http://tickets.test",
    )
    .unwrap();
    let mailer = mail::spawn(pool.clone(), key.clone(), settings).unwrap();

    let (first_order, secret) = common::api_buy_with_secret(&app, tt, 1, "ada@example.org").await;
    let page = app
        .client
        .get(app.url(&format!("/events/{event_id}")))
        .send()
        .await
        .unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("Join the waiting list"), "{page}");

    // A bad field comes back named, with the form filled in; nothing written.
    let path = format!("/events/{event_id}/waiting-list");
    let tt_text = tt.to_string();
    let bad = app
        .post_form(
            &path,
            &[
                ("ticket_type_id", &tt_text),
                ("quantity", "2"),
                ("email", "bea@example.org"),
            ],
        )
        .await;
    assert_eq!(bad.status(), 422);
    let bad = bad.text().await.unwrap();
    assert!(
        bad.contains("At most 1 tickets") && bad.contains("value=\"bea@example.org\""),
        "{bad}"
    );
    let bad = app
        .post_form(
            &path,
            &[
                ("ticket_type_id", &tt_text),
                ("quantity", "1"),
                ("email", "not-mail"),
            ],
        )
        .await;
    assert_eq!(bad.status(), 422);
    let places: i64 = sqlx::query_scalar("SELECT count(*) FROM waitlist_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(places, 0);

    let joined = app
        .post_form(
            &path,
            &[
                ("ticket_type_id", &tt_text),
                ("quantity", "1"),
                ("email", "Bea@Example.org"),
            ],
        )
        .await;
    assert_eq!(joined.status(), 200);
    let joined = joined.text().await.unwrap();
    assert!(joined.contains("is on its way to"), "{joined}");
    let again = app
        .post_form(
            &path,
            &[
                ("ticket_type_id", &tt_text),
                ("quantity", "1"),
                ("email", "bea@example.org"),
            ],
        )
        .await;
    // The same answer: the page does not tell who is on a list.
    assert_eq!(again.status(), 200);
    let again = again.text().await.unwrap();
    assert!(again.contains("is on its way to"), "{again}");

    // Ada's hold mail does not exist (her order is confirmed at once: she
    // gets her tickets); Bea's place mail does.
    let place_mail = sink
        .wait_for_mail(Duration::from_secs(20), |m| m.to == ["bea@example.org"])
        .await;
    assert_eq!(
        place_mail.header("Subject").as_deref(),
        Some("Confirm your place on the waiting list")
    );
    let mails = [place_mail];
    let link = mails[0]
        .line_starting("http://tickets.test/waiting-list/")
        .unwrap();
    let confirm_path = link.strip_prefix("http://tickets.test").unwrap().to_owned();
    let forged = format!(
        "{}t={}",
        confirm_path.split("t=").next().unwrap(),
        "A".repeat(43)
    );
    assert_eq!(mailed_link::press(&app, &forged).await.status(), 403);
    // Opening the link (a mail scanner's fetch) takes no place in line.
    mailed_link::open(&app, &confirm_path).await;
    let place: String = sqlx::query_scalar("SELECT status FROM waitlist_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(place, "unconfirmed");
    let confirmed = mailed_link::press(&app, &confirm_path).await;
    assert_eq!(confirmed.status(), 303);
    let place_page = common::location(&confirmed);
    let page = app.client.get(app.url(&place_page)).send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("You are in line. You are next."), "{page}");

    // Ada cancels: Bea is mailed an offer, whose link confirms her order.
    sale::cancel(
        &pool,
        now(),
        first_order.into(),
        CancelSecret::parse(&secret).as_ref(),
    )
    .await
    .unwrap();
    let offer = &sink
        .wait_for_mail(Duration::from_secs(20), |m| {
            m.header("Subject").as_deref() == Some("Tickets came back for you")
        })
        .await;
    assert_eq!(offer.to, ["bea@example.org"]);
    assert_eq!(
        offer.header("Subject").as_deref(),
        Some("Tickets came back for you")
    );
    let link = offer.line_starting("http://tickets.test/orders/").unwrap();
    let offer_path = link.strip_prefix("http://tickets.test").unwrap().to_owned();
    mailed_link::open(&app, &offer_path).await;
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orders WHERE email = 'bea@example.org' AND status = 'held'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(held, 1, "opening the offer's link confirmed it");
    for _ in 0..2 {
        let resp = mailed_link::press(&app, &offer_path).await;
        assert_eq!(resp.status(), 303);
    }
    let page = app.client.get(app.url(&place_page)).send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("is confirmed"), "{page}");
    let confirmed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orders WHERE email = 'bea@example.org' AND status = 'confirmed'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(confirmed, 1);
    assert_invariants(&pool).await;

    // The organizer sees the list; another organizer does not.
    let organizer = app.organizer("org@example.org").await;
    sqlx::query("UPDATE events SET organizer_id = $2 WHERE id = $1")
        .bind(event_id)
        .bind(organizer.id)
        .execute(&pool)
        .await
        .unwrap();
    let list = organizer
        .get(&format!("/organizer/events/{event_id}/waiting-list"))
        .await;
    assert_eq!(list.status(), 200);
    let list = list.text().await.unwrap();
    assert!(
        list.contains("bea@example.org") && list.contains("Automatic offers are on"),
        "{list}"
    );
    let off = organizer
        .post_form(
            &format!("/organizer/events/{event_id}/waiting-list/offers"),
            &[("offers", "off")],
        )
        .await;
    assert_eq!(off.status(), 303);
    let on: bool = sqlx::query_scalar("SELECT waitlist_offers FROM events WHERE id = $1")
        .bind(event_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!on);
    // The API reads the same, and switches offers back on.
    let path = format!("/api/v1/organizer/events/{event_id}/waiting-list");
    let read: serde_json::Value = organizer
        .api(reqwest::Method::GET, &path)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["offers"], false);
    assert_eq!(read["lengths"][0]["waiting"], 0);
    assert_eq!(read["entries"][0]["email"], "bea@example.org");
    assert_eq!(read["entries"][0]["status"], "offered");
    let bad = organizer
        .api(reqwest::Method::PUT, &path)
        .json(&serde_json::json!({"offers": "yes"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 422);
    let switched: serde_json::Value = organizer
        .api(reqwest::Method::PUT, &path)
        .json(&serde_json::json!({"offers": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(switched["offers"], true);
    let stranger = app.organizer("other@example.org").await;
    let denied = stranger
        .api(reqwest::Method::GET, &path)
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 404);
    let hidden = stranger
        .get(&format!("/organizer/events/{event_id}/waiting-list"))
        .await;
    assert_eq!(hidden.status(), 404);
    mailer.abort();
}

//! The listing flood (issue 34): an organizer who signed up on the web may
//! prepare events but publish none until they follow the link mailed to
//! their address. Against real Postgres, the app and a real SMTP server on
//! loopback.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::*;
use crate::common::{
    logs::Captured,
    mailed_link,
    organizer::api_create_event,
    smtp::{PUBLIC, Sink, app_and_mailer},
};

async fn confirmed(pool: &PgPool, id: Uuid) -> bool {
    sqlx::query_scalar("SELECT email_confirmed_at IS NOT NULL FROM organizers WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn published(pool: &PgPool, organizer: Uuid) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE organizer_id = $1 AND status = 'published'",
    )
    .bind(organizer)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn confirmation_requests(pool: &PgPool, email: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM mail_requests WHERE kind = 'organizer_confirm' AND email = $1",
    )
    .bind(email)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test]
async fn a_web_sign_up_publishes_nothing_until_the_mailed_link_is_followed(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let sink = Sink::start().await;
    let (app, mailer) = app_and_mailer(&pool, Some(&sink)).await;
    let org = app.unconfirmed_organizer("new@example.org").await;
    assert!(!confirmed(&pool, org.id).await);

    // Its page says why, with a button that mails the link again.
    let page = org.get("/organizer").await.text().await.unwrap();
    assert!(
        page.contains("Confirm your address to publish events")
            && page.contains("action=\"/organizer/settings/confirmation-mail\""),
        "{page}"
    );

    // Publishing is refused everywhere, naming the field, and writes nothing.
    let resp = org
        .post_form(
            "/organizer/events",
            &borrowed(&with(&new_event_form("Flood 1"), "status", "published")),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = resp.text().await.unwrap();
    assert!(
        page.contains("Confirm your email address before publishing") && page.contains("Flood 1"),
        "the form comes back filled in with the reason: {page}"
    );
    let body = json!({
        "title": "Flood 2", "venue": "Hall", "starts_at": "2030-03-01T19:30:00Z",
        "sale_opens_at": "2020-01-01T10:00:00Z", "status": "published",
        "ticket_types": [{"name": "Standing", "price_minor": 0, "currency": "EUR", "capacity": 5}],
    });
    let resp = api_create_event(&org, &body).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(error["error"]["field"], "status", "{error}");
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(events, 0, "a refused creation writes nothing");

    // A draft is fine; publishing it (page and API) is not.
    let mut draft = body.clone();
    draft["title"] = json!("Draft");
    draft["status"] = json!("draft");
    let draft = api_create_event(&org, &draft).await;
    assert_eq!(draft.status(), StatusCode::CREATED);
    let draft: serde_json::Value = draft.json().await.unwrap();
    let event_id = draft["id"].as_str().unwrap().to_owned();
    let resp = org
        .post_form(&format!("/organizer/events/{event_id}/publish"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let resp = org
        .api(
            Method::POST,
            &format!("/api/v1/organizer/events/{event_id}/publish"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(published(&pool, org.id).await, 0);

    // The mail carries the link; opening it (as a mail scanner does, GET
    // or HEAD) changes nothing.
    let mail = sink
        .wait_for_mail(Duration::from_secs(20), |m| m.to == ["new@example.org"])
        .await;
    let link = mail
        .line_starting(&format!("{PUBLIC}/account/confirm-email/"))
        .unwrap_or_else(|| panic!("a link in {}", mail.data));
    let path = link.strip_prefix(PUBLIC).unwrap().to_owned();
    assert!(path.starts_with(&format!("/account/confirm-email/{}?t=", org.id)));
    let head = app.client.head(app.url(&path)).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    let (action, token) = mailed_link::open(&app, &path).await;
    assert!(
        !confirmed(&pool, org.id).await,
        "a GET confirmed the address"
    );

    // A token that is not this account's confirms nothing: another
    // organizer's, a made-up one, or none.
    let other = app.unconfirmed_organizer("other@example.org").await;
    for (target, t) in [
        (
            format!("/account/confirm-email/{}", other.id),
            token.as_str(),
        ),
        (action.clone(), "A".repeat(43).as_str()),
        (action.clone(), ""),
    ] {
        let resp = app.post_form(&target, &[("t", t)]).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{target}");
    }
    assert!(!confirmed(&pool, other.id).await);
    assert!(!confirmed(&pool, org.id).await);
    // Without the CSRF field the button's POST is refused.
    let resp = app
        .client
        .post(app.url(&action))
        .form(&[("t", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(!confirmed(&pool, org.id).await);

    // The button confirms (no log-in needed: the link proves the mailbox),
    // and a second press is harmless.
    for _ in 0..2 {
        let resp = mailed_link::press(&app, &path).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(resp.text().await.unwrap().contains("Address confirmed"));
    }
    assert!(confirmed(&pool, org.id).await);
    let page = org.get("/organizer").await.text().await.unwrap();
    assert!(!page.contains("confirmation-mail"), "{page}");

    // Now the draft publishes.
    let resp = org
        .post_form(&format!("/organizer/events/{event_id}/publish"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(published(&pool, org.id).await, 1);
    mailer.abort();
}

#[sqlx::test]
async fn the_link_is_mailed_again_at_most_every_five_minutes_and_not_once_confirmed(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let sink = Sink::start().await;
    let (app, mailer) = app_and_mailer(&pool, Some(&sink)).await;
    let org = app.unconfirmed_organizer("again@example.org").await;
    sink.wait_for(1, Duration::from_secs(20)).await;

    // Right after the sign-up's mail: nothing more is asked.
    let resp = org
        .post_form("/organizer/settings/confirmation-mail", &[])
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.text().await.unwrap().contains("a few minutes ago"));
    assert_eq!(confirmation_requests(&pool, "again@example.org").await, 1);

    // Five minutes on, one more (asked twice at once: still one).
    sqlx::query("UPDATE mail_requests SET requested_at = requested_at - interval '6 minutes'")
        .execute(&pool)
        .await
        .unwrap();
    let (a, b) = tokio::join!(
        org.post_form("/organizer/settings/confirmation-mail", &[]),
        org.post_form("/organizer/settings/confirmation-mail", &[]),
    );
    let pages = [a.text().await.unwrap(), b.text().await.unwrap()];
    assert_eq!(
        pages.iter().filter(|p| p.contains("is on its way")).count(),
        1
    );
    assert_eq!(confirmation_requests(&pool, "again@example.org").await, 2);
    let mails = sink.wait_for(2, Duration::from_secs(20)).await;
    assert!(mails.iter().all(|m| m.to == ["again@example.org"]));

    // Once confirmed, no more mails however long ago the last one was.
    let link = mails[1]
        .line_starting(&format!("{PUBLIC}/account/confirm-email/"))
        .unwrap();
    let resp = mailed_link::press(&app, link.strip_prefix(PUBLIC).unwrap()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    sqlx::query("UPDATE mail_requests SET requested_at = requested_at - interval '1 hour'")
        .execute(&pool)
        .await
        .unwrap();
    let resp = org
        .post_form("/organizer/settings/confirmation-mail", &[])
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(confirmation_requests(&pool, "again@example.org").await, 2);
    // Logged out, the resend button is the log-in page's business.
    let resp = app
        .post_form("/organizer/settings/confirmation-mail", &[])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    mailer.abort();
}

/// Without SMTP (`cargo run --release` on a laptop) nothing is mailed and
/// the link is logged, as every mail's link is: the organizer can still
/// confirm their address, and publish.
#[sqlx::test]
async fn without_smtp_the_link_is_logged_and_it_confirms(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let logs = Captured::install();
    let pool = pool(connect, 10).await;
    let (app, mailer) = app_and_mailer(&pool, None).await;
    let org = app.unconfirmed_organizer("dev@example.org").await;
    let prefix = format!("link={PUBLIC}/account/confirm-email/{}?t=", org.id);
    let mut link = None;
    for _ in 0..200 {
        link = logs
            .text()
            .lines()
            .filter(|line| line.contains("mail link (no SMTP configured)"))
            .flat_map(str::split_whitespace)
            .find(|word| word.starts_with(&prefix))
            .map(|word| word["link=".len()..].to_owned());
        if link.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let link = link.unwrap_or_else(|| panic!("no link logged: {}", logs.text()));
    let resp = mailed_link::press(&app, link.strip_prefix(PUBLIC).unwrap()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(confirmed(&pool, org.id).await);
    mailer.abort();
}

//! CSRF on every state-changing form.

use reqwest::{Response, StatusCode};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{
    common::{forms::*, organizer::*, *},
    http::support::*,
};

// CSRF
// ---------------------------------------------------------------------------

/// One state-changing page form, ready to post from its browser.
struct FormPost {
    what: &'static str,
    client: reqwest::Client,
    url: String,
    fields: Vec<(String, String)>,
    /// The CSRF cookie header for clients without a cookie jar; `None` when
    /// the client's jar already holds it.
    cookie: Option<String>,
    token: String,
    success: StatusCode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Csrf {
    Valid,
    MissingField,
    WrongField,
    MissingCookie,
}

impl FormPost {
    async fn send(&self, csrf: Csrf, headers: &[(&str, &str)]) -> Response {
        let fields = borrowed(&self.fields);
        let wrong = format!("{}wrongtoken1", Uuid::new_v4().simple());
        let body = match csrf {
            Csrf::Valid | Csrf::MissingCookie => with_csrf(&fields, &self.token),
            Csrf::WrongField => with_csrf(&fields, &wrong),
            Csrf::MissingField => urlencoded(&fields),
        };
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(cookie) = &self.cookie
            && csrf != Csrf::MissingCookie
        {
            request = request.header("cookie", cookie);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap()
    }
}

/// Every state-changing page form, each with what makes it succeed, in an
/// order in which each succeeds after the ones before it.
async fn every_form(app: &TestApp) -> (Organizer, Vec<FormPost>) {
    let org = app.organizer("csrf@example.org").await;
    let spec = [TicketSpec::new(10, 4, 8)];
    let on_sale = owned_event(&org, opened(), "published", &spec).await;
    let draft = owned_event(&org, opened(), "draft", &spec).await;
    let to_unpublish = owned_event(&org, opened(), "published", &spec).await;
    let to_cancel = owned_event(&org, opened(), "published", &spec).await;
    api_buy(app, to_cancel.ticket_type_id(), 2, "fan@example.org").await;
    let (order, secret) =
        api_buy_with_secret(app, on_sale.ticket_type_id(), 1, "ada@example.org").await;
    let token = token_id(&app.pool, org.id, "tests").await;

    let anonymous = |what, path: String, fields: &[(&str, &str)], success| FormPost {
        what,
        client: app.client.clone(),
        url: app.url(&path),
        fields: owned_fields(fields),
        cookie: Some(csrf_cookie()),
        token: CSRF_TOKEN.to_owned(),
        success,
    };
    let organizer = |what, path: String, fields: Vec<(String, String)>, success| FormPost {
        what,
        client: org.client.clone(),
        url: org.url(&path),
        fields,
        cookie: None,
        token: org.csrf.clone(),
        success,
    };
    let tt = on_sale.ticket_type_id().to_string();
    let forms = vec![
        anonymous(
            "buy",
            format!("/events/{}/orders", on_sale.event_id),
            &[
                ("ticket_type_id", &tt),
                ("quantity", "2"),
                ("email", "buyer@example.org"),
                ("idempotency_key", "csrf-buy-1-0123456789abcdef"),
            ],
            StatusCode::SEE_OTHER,
        ),
        anonymous(
            "cancel order",
            format!("/orders/{order}/cancel"),
            &[("s", &secret)],
            StatusCode::SEE_OTHER,
        ),
        anonymous(
            "sign up",
            "/signup".to_owned(),
            &[("email", "new@example.org"), ("password", PASSWORD)],
            StatusCode::SEE_OTHER,
        ),
        anonymous(
            "log in",
            "/login".to_owned(),
            &[
                ("email", "csrf@example.org"),
                ("password", PASSWORD),
                ("next", "/organizer"),
            ],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "create event",
            "/organizer/events".to_owned(),
            new_event_form("Forged"),
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "edit event",
            format!("/organizer/events/{}/edit", on_sale.event_id),
            edit_form(on_sale.ticket_type_id(), "Forged title", "10"),
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "publish",
            format!("/organizer/events/{}/publish", draft.event_id),
            vec![],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "unpublish",
            format!("/organizer/events/{}/unpublish", to_unpublish.event_id),
            vec![],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "cancel event",
            format!("/organizer/events/{}/cancel", to_cancel.event_id),
            vec![],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "create token",
            "/organizer/settings/tokens".to_owned(),
            owned_fields(&[("name", "forged")]),
            StatusCode::OK,
        ),
        organizer(
            "revoke token",
            format!("/organizer/settings/tokens/{token}/revoke"),
            vec![],
            StatusCode::SEE_OTHER,
        ),
        organizer(
            "log out",
            "/logout".to_owned(),
            vec![],
            StatusCode::SEE_OTHER,
        ),
    ];
    (org, forms)
}

/// The form, sent as a real same-origin browser would, succeeds and writes:
/// so the refusals before it were about the token, and the snapshot sees
/// what this form writes.
async fn assert_form_works(app: &TestApp, post: &FormPost, before: &[(&str, i64, String)]) {
    let origin = app.url("");
    let resp = post
        .send(
            Csrf::Valid,
            &[("sec-fetch-site", "same-origin"), ("origin", &origin)],
        )
        .await;
    assert_eq!(
        resp.status(),
        post.success,
        "{} with a valid token",
        post.what
    );
    assert_ne!(
        snapshot(&app.pool).await,
        before,
        "{} with a valid token wrote nothing",
        post.what
    );
}

#[sqlx::test]
async fn every_state_changing_form_without_a_valid_csrf_token_is_403_and_writes_nothing(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_org, forms) = every_form(&app).await;
    for post in &forms {
        let before = snapshot(&pool).await;
        let mut variants = vec![Csrf::MissingField, Csrf::WrongField];
        if post.cookie.is_some() {
            variants.push(Csrf::MissingCookie);
        }
        for csrf in variants {
            let resp = post.send(csrf, &[]).await;
            assert_eq!(
                resp.status(),
                StatusCode::FORBIDDEN,
                "{} with {csrf:?}",
                post.what
            );
            let body = resp.text().await.unwrap();
            assert!(
                body.contains("did not come from Stampede"),
                "{} with {csrf:?}: {body}",
                post.what
            );
        }
        assert_eq!(
            snapshot(&pool).await,
            before,
            "{} without a valid token wrote",
            post.what
        );
        assert_form_works(&app, post, &before).await;
    }
}

#[sqlx::test]
async fn every_state_changing_form_posted_cross_site_is_403_even_with_a_valid_token(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_org, forms) = every_form(&app).await;
    for post in &forms {
        let before = snapshot(&pool).await;
        for headers in [
            &[("sec-fetch-site", "cross-site")][..],
            &[("sec-fetch-site", "same-site")][..],
            &[("origin", "https://evil.example")][..],
            &[("origin", "null")][..],
        ] {
            let resp = post.send(Csrf::Valid, headers).await;
            assert_eq!(
                resp.status(),
                StatusCode::FORBIDDEN,
                "{} with {headers:?}",
                post.what
            );
        }
        assert_eq!(
            snapshot(&pool).await,
            before,
            "{} posted cross-site wrote",
            post.what
        );
        assert_form_works(&app, post, &before).await;
    }
}

// ---------------------------------------------------------------------------

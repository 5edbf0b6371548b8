//! Sign-up, log-in, sessions, log-out and the log-in rate limit.

use super::*;

#[sqlx::test]
async fn sign_up_refuses_a_bad_email_a_short_password_or_a_taken_email_with_422_and_the_form_refilled(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("taken@example.org").await;
    let organizers = count(&pool, "SELECT count(*) FROM organizers").await;

    let cases = [
        (
            "not-an-email",
            "long enough password",
            "&quot;not-an-email&quot; is not a valid email address.",
        ),
        (
            "short@example.org",
            "pw-2short",
            "Use at least 10 characters for your password.",
        ),
        (
            "Taken@Example.org",
            "another long password",
            "An organizer with this email already exists; log in instead.",
        ),
    ];
    for (email, password, message) in cases {
        let resp = app
            .post_form("/signup", &[("email", email), ("password", password)])
            .await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{email}");
        assert!(
            set_cookie(&resp, "stampede_session").is_none(),
            "{email}: a refused sign-up started a session"
        );
        let body = resp.text().await.unwrap();
        assert!(body.contains(message), "{email}: {body}");
        assert!(body.contains("role=\"alert\""), "{email}: {body}");
        assert!(
            body.contains(&format!("value=\"{email}\"")),
            "{email}: the email is not refilled: {body}"
        );
        assert!(
            !body.contains(password),
            "{email}: the password came back: {body}"
        );
        assert!(body.contains("action=\"/signup\""), "{email}: {body}");
    }
    assert_eq!(
        count(&pool, "SELECT count(*) FROM organizers").await,
        organizers
    );
}

#[sqlx::test]
async fn log_in_with_a_wrong_password_or_an_unknown_email_is_401_with_the_message(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("ada@example.org").await;
    for (email, password) in [
        ("ada@example.org", "wrong password!"),
        ("nobody@example.org", PASSWORD),
        ("not an email", PASSWORD),
        ("ada@example.org", ""),
    ] {
        let resp = log_in(&app, email, password, "/organizer").await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{email}");
        assert!(
            set_cookie(&resp, "stampede_session").is_none(),
            "{email}: a failed log-in started a session"
        );
        let body = resp.text().await.unwrap();
        assert!(
            body.contains("That email and password do not match an organizer account."),
            "{email}: {body}"
        );
        assert!(
            body.contains(&format!("value=\"{email}\"")),
            "{email}: {body}"
        );
        if !password.is_empty() {
            assert!(!body.contains(password), "{email}: {body}");
        }
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM sessions").await, 1);
}

#[sqlx::test]
async fn log_in_follows_next_only_inside_the_organizer_area(pool: PgPool) {
    let cases = [
        ("/organizer/settings", "/organizer/settings"),
        ("/organizer/events/new", "/organizer/events/new"),
        (
            "/organizer/events/0b7f3a52-9c1e-4d4a-8f7e-2a6c5d9e1b30/edit",
            "/organizer/events/0b7f3a52-9c1e-4d4a-8f7e-2a6c5d9e1b30/edit",
        ),
        // Where a logged-out click on "Download orders" is sent back to.
        (
            "/organizer/events/0b7f3a52-9c1e-4d4a-8f7e-2a6c5d9e1b30/orders.csv",
            "/organizer/events/0b7f3a52-9c1e-4d4a-8f7e-2a6c5d9e1b30/orders.csv",
        ),
        ("/organizer", "/organizer"),
        ("", "/organizer"),
        ("/", "/organizer"),
        ("https://evil.example/organizer", "/organizer"),
        ("//evil.example", "/organizer"),
        ("//evil.example/organizer/", "/organizer"),
        ("/organizer//evil.example", "/organizer"),
        ("/\\evil.example", "/organizer"),
        ("/organizer\\..\\..\\evil", "/organizer"),
        ("/organizerx", "/organizer"),
        ("/events/x", "/organizer"),
        ("javascript:alert(1)", "/organizer"),
    ];
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("ada@example.org").await;

    for (next, expected) in cases {
        // The form carries only a safe `next`.
        let resp = app
            .client
            .get(app.url(&format!("/login?next={}", encode(next))))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{next}");
        let body = resp.text().await.unwrap();
        assert!(
            body.contains(&format!("name=\"next\" value=\"{expected}\"")),
            "GET /login?next={next}: {body}"
        );
    }
    // Log-ins are limited per client (a burst of 10 per app): a fresh app
    // for every few attempts.
    for chunk in cases.chunks(7) {
        let app = TestApp::spawn(pool.clone()).await;
        for (next, expected) in chunk {
            let resp = log_in(&app, "ada@example.org", PASSWORD, next).await;
            assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{next}");
            assert_eq!(location(&resp), *expected, "next {next}");
        }
    }
}

#[sqlx::test]
async fn log_in_next_with_dot_segments_cannot_climb_out_of_the_organizer_area(pool: PgPool) {
    // A browser resolves `/organizer/../x` (also spelt `%2e%2e`) to `/x`.
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("ada@example.org").await;
    for next in ["/organizer/../logout", "/organizer/%2e%2e/events"] {
        let resp = log_in(&app, "ada@example.org", PASSWORD, next).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{next}");
        assert_eq!(
            location(&resp),
            "/organizer",
            "next {next} leaves /organizer"
        );
    }
}

#[sqlx::test]
async fn the_session_cookie_is_http_only_and_same_site_lax_and_gets_a_new_id_at_log_in(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    // Sign-up logs in too.
    let resp = app
        .post_form(
            "/signup",
            &[("email", "ada@example.org"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/organizer");
    let signed_up = session_id(&resp);

    let resp = log_in(&app, "ada@example.org", PASSWORD, "/organizer").await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let header = set_cookie(&resp, "stampede_session").unwrap();
    let attributes: Vec<String> = header
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_ascii_lowercase())
        .collect();
    assert!(
        attributes.iter().any(|a| a == "httponly"),
        "session cookie: {header}"
    );
    assert!(
        attributes.iter().any(|a| a == "samesite=lax"),
        "session cookie: {header}"
    );
    assert!(
        attributes.iter().any(|a| a == "path=/"),
        "session cookie: {header}"
    );
    let first = cookie_value(&header);
    assert_ne!(first, signed_up);

    // The CSRF cookie is HttpOnly and SameSite=Lax as well.
    let resp = app.client.get(app.url("/login")).send().await.unwrap();
    let csrf = set_cookie(&resp, "stampede_csrf").expect("a fresh CSRF cookie");
    assert!(csrf.contains("HttpOnly"), "{csrf}");
    assert!(csrf.contains("SameSite=Lax"), "{csrf}");

    // Logging in from a browser that already carries a session (planted or
    // not) gives a new id, and the old one stops working.
    let resp = post_with_cookies(
        &app,
        "/login",
        &[
            ("email", "ada@example.org"),
            ("password", PASSWORD),
            ("next", "/organizer"),
        ],
        &[("stampede_session", &first)],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let second = session_id(&resp);
    assert_ne!(second, first, "the session id did not change at log-in");

    let resp = get_with_session(&app, "/organizer", &first).await;
    assert_eq!(
        resp.status(),
        StatusCode::SEE_OTHER,
        "the old id still works"
    );
    assert_eq!(location(&resp), login_redirect("/organizer"));
    let resp = get_with_session(&app, "/organizer", &second).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.text().await.unwrap().contains("ada@example.org"));
}

#[sqlx::test]
async fn log_out_ends_the_session(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("ada@example.org").await;
    let resp = log_in(&app, "ada@example.org", PASSWORD, "/organizer").await;
    let session = session_id(&resp);
    assert_eq!(
        get_with_session(&app, "/organizer", &session)
            .await
            .status(),
        StatusCode::OK
    );

    let resp = post_with_cookies(&app, "/logout", &[], &[("stampede_session", &session)]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/");
    let stored = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sessions WHERE id = $1")
        .bind(&session)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0, "the session is still stored");
    for path in ["/organizer", "/organizer/settings"] {
        let resp = get_with_session(&app, path, &session).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(location(&resp), login_redirect(path));
    }

    // The same through the cookie jar of a browser.
    let resp = org.post_form("/logout", &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let resp = org.get("/organizer").await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), login_redirect("/organizer"));
}

#[sqlx::test]
async fn more_log_in_attempts_than_the_burst_from_one_client_get_429_with_retry_after(
    pool: PgPool,
) {
    let burst = stampede::web::Limits::default().login_burst as usize;
    let app = TestApp::spawn(pool.clone()).await;
    app.organizer("ada@example.org").await;

    // All at once, each claiming another address in headers that no proxy
    // set: the limit is on the peer address.
    let attempts = (0..burst * 2).map(|i| {
        let forwarded = format!("10.0.{}.{}", i / 200, i % 200 + 1);
        let request = app
            .client
            .post(app.url("/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", csrf_cookie())
            .header("x-forwarded-for", forwarded.clone())
            .header("x-real-ip", forwarded)
            .body(form_body(&[
                ("email", "ada@example.org"),
                ("password", &format!("guess number {i}")),
            ]));
        async move { request.send().await.unwrap() }
    });
    let responses = futures::future::join_all(attempts).await;

    let mut refused = 0;
    let mut limited = 0;
    for resp in responses {
        match resp.status() {
            StatusCode::UNAUTHORIZED => refused += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                limited += 1;
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .expect("429 without Retry-After")
                    .to_str()
                    .unwrap()
                    .parse::<u64>()
                    .expect("Retry-After in seconds");
                assert!(retry_after > 0);
                let body = resp.text().await.unwrap();
                assert!(body.contains("Too many attempts"), "{body}");
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(
        refused >= burst,
        "only {refused} attempts were checked before the limit"
    );
    assert!(
        limited >= 1,
        "{} attempts at once were never limited",
        burst * 2
    );
    // Only log-in attempts are limited.
    let resp = app.client.get(app.url("/login")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(count(&pool, "SELECT count(*) FROM sessions").await, 1);
}

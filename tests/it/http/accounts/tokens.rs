//! API tokens, and the `stampede organizer add` command.

use super::*;

#[sqlx::test]
async fn an_api_token_from_the_settings_page_is_shown_once_works_as_bearer_and_stops_when_revoked(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("tokens@example.org").await;

    let resp = org
        .post_form("/organizer/settings/tokens", &[("name", "Box office")])
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let page = resp.text().await.unwrap();
    assert!(page.contains("it will not be shown again"), "{page}");
    let token = token_on_page(&page);
    assert!(token.starts_with("stp_"), "{token}");
    assert_eq!(token.len(), 47, "{token}");

    // It works as a bearer token, for this organizer.
    let resp = list_own_events(&app, &token).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let owner = create_event_with_token(&app, &token, "By token").await;
    assert_eq!(owner, Some(org.id));

    // Afterwards the settings page lists it by its prefix only.
    let id = token_id(&pool, org.id, "Box office").await;
    let settings = org.get("/organizer/settings").await.text().await.unwrap();
    assert!(settings.contains("Box office"), "{settings}");
    assert!(
        settings.contains(&format!("<code>{}…</code>", &token[..10])),
        "{settings}"
    );
    assert!(!settings.contains(&token), "the token is shown again");
    assert!(
        !settings.contains(&token[10..]),
        "the token's secret part is shown again"
    );
    assert!(
        settings.contains(&format!(
            "action=\"/organizer/settings/tokens/{id}/revoke\""
        )),
        "{settings}"
    );

    // Revoked: refused, marked, and a second revoke finds nothing to revoke.
    let resp = org
        .post_form(&format!("/organizer/settings/tokens/{id}/revoke"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/organizer/settings");
    assert_unauthorized_json(list_own_events(&app, &token).await, "revoked token").await;
    let settings = org.get("/organizer/settings").await.text().await.unwrap();
    assert!(settings.contains("revoked"), "{settings}");
    assert!(
        !settings.contains(&format!(
            "action=\"/organizer/settings/tokens/{id}/revoke\""
        )),
        "{settings}"
    );
    let resp = org
        .post_form(&format!("/organizer/settings/tokens/{id}/revoke"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    // The organizer's other token is untouched.
    assert_eq!(
        list_own_events(&app, &org.api_token).await.status(),
        StatusCode::OK
    );

    // An unnamed token is refused with the form.
    let tokens = count(&pool, "SELECT count(*) FROM api_tokens").await;
    let resp = org
        .post_form("/organizer/settings/tokens", &[("name", "   ")])
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("Give the token a name of 1 to 100 characters.")
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM api_tokens").await,
        tokens
    );
}

#[sqlx::test]
async fn api_tokens_are_stored_as_hashes_and_their_text_is_nowhere_in_the_database(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("hash@example.org").await;
    let from_page = create_token_on_page(&org, "Box office").await;
    // Use them, so that nothing written on use stores them either.
    for token in [&from_page, &org.api_token] {
        assert_eq!(list_own_events(&app, token).await.status(), StatusCode::OK);
    }

    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(tables.iter().any(|t| t == "api_tokens"), "{tables:?}");
    for token in [&from_page, &org.api_token] {
        let stored: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM api_tokens
             WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND prefix = left($1, 10)",
        )
        .bind(token)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(stored, 1, "no row holds the SHA-256 of {token}");
        for needle in [token.as_str(), &token[10..]] {
            for table in &tables {
                let hits: i64 = sqlx::query_scalar(&format!(
                    "SELECT count(*) FROM \"{table}\" x WHERE strpos(x::text, $1) > 0"
                ))
                .bind(needle)
                .fetch_one(&pool)
                .await
                .unwrap();
                assert_eq!(hits, 0, "{table} holds the token text");
            }
            // Binary columns, as bytes rather than hex.
            for (table, column) in [("api_tokens", "token_hash"), ("sessions", "data")] {
                let hits: i64 = sqlx::query_scalar(&format!(
                    "SELECT count(*) FROM {table} WHERE position(convert_to($1, 'UTF8') IN {column}) > 0"
                ))
                .bind(needle)
                .fetch_one(&pool)
                .await
                .unwrap();
                assert_eq!(hits, 0, "{table}.{column} holds the token text");
            }
        }
    }
}

/// Run the real binary with `stdin` as its standard input.
async fn stampede_cli(database_url: &str, args: &[&str], stdin: &str) -> std::process::Output {
    use tokio::io::AsyncWriteExt as _;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("--database-url")
        .arg(database_url)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the stampede binary starts");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    child.wait_with_output().await.unwrap()
}

#[sqlx::test]
async fn organizer_add_prints_a_token_that_works_and_the_password_logs_in(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect.clone(), 8).await;
    let url = database_url(&connect);
    let password = "a password typed into a pipe";
    let out = stampede_cli(
        &url,
        &["organizer", "add", "Cli@Example.org", "--password-stdin"],
        &format!("{password}\n"),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let stdout = String::from_utf8(out.stdout).unwrap();
    // Only the token goes to stdout, so that scripts can capture it.
    assert_eq!(stdout.lines().count(), 1, "stdout: {stdout:?}");
    let token = stdout.trim().to_owned();
    assert!(token.starts_with("stp_") && token.len() == 47, "{token:?}");

    let (id, email, confirmed): (Uuid, String, bool) = sqlx::query_as(
        "SELECT id, email, email_confirmed_at IS NOT NULL FROM organizers
         WHERE email = 'cli@example.org'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(email, "cli@example.org");
    // An operator made it: its address counts as confirmed, no mail asked.
    assert!(confirmed);
    let asked: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_requests")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(asked, 0);
    // The token is stored under the default name.
    token_id(&pool, id, "command line").await;

    let app = TestApp::spawn(pool.clone()).await;
    let resp = list_own_events(&app, &token).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let owner = create_event_with_token(&app, &token, "Scripted").await;
    assert_eq!(owner, Some(id));

    // The password (without its newline) logs in through the page.
    let resp = log_in(&app, "cli@example.org", password, "/organizer").await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/organizer");
    let session = session_id(&resp);
    let resp = get_with_session(&app, "/organizer", &session).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.text().await.unwrap();
    assert!(body.contains("cli@example.org"), "{body}");
    assert!(body.contains("Scripted"), "{body}");
    pool.close().await;
}

#[sqlx::test]
async fn organizer_add_refuses_a_short_password_or_a_taken_email_and_writes_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect.clone(), 8).await;
    let url = database_url(&connect);
    let out = stampede_cli(
        &url,
        &["organizer", "add", "first@example.org", "--password-stdin"],
        "a long enough password\n",
    )
    .await;
    assert!(out.status.success());
    let before = snapshot(&pool).await;

    for (email, password) in [
        ("short@example.org", "short\n"),
        ("FIRST@example.org", "another long password\n"),
        ("not-an-email", "a long enough password\n"),
    ] {
        let out = stampede_cli(
            &url,
            &["organizer", "add", email, "--password-stdin"],
            password,
        )
        .await;
        assert!(!out.status.success(), "{email}: succeeded");
        assert!(out.stdout.is_empty(), "{email}: printed a token");
        assert!(!out.stderr.is_empty(), "{email}: no reason given");
    }
    assert_eq!(snapshot(&pool).await, before);
    pool.close().await;
}

//! Hidden ticket types on the pages and in the API; codes on the
//! organizer's page.

use super::*;

#[sqlx::test]
async fn a_hidden_ticket_type_is_invisible_without_its_code_on_the_pages_and_in_the_api(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("presale@example.org").await;
    let fixture = common::organizer::owned_published_event(
        &org,
        &[TicketSpec::new(10, 2, 2), TicketSpec::new(10, 2, 2)],
    )
    .await;
    let hidden = fixture.ticket_type_ids[1];
    // The organizer hides the second type and makes a code for it (API).
    let resp = org
        .api(
            Method::PATCH,
            &format!(
                "/api/v1/organizer/events/{}/ticket-types/{hidden}",
                fixture.event_id
            ),
        )
        .json(&json!({"hidden": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let resp = org
        .api(
            Method::POST,
            &format!(
                "/api/v1/organizer/events/{}/presale-codes",
                fixture.event_id
            ),
        )
        .json(&json!({"code": "vip-room", "max_uses": 4, "ticket_type_ids": [hidden]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["codes"][0]["code"], "VIP-ROOM");
    assert_eq!(created["codes"][0]["used"], 0);

    let hidden_name = "General admission 1";
    let page = |path: String| {
        let client = app.client.clone();
        let url = app.url(&path);
        async move { client.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let event_page = page(format!("/events/{}", fixture.event_id)).await;
    assert!(event_page.contains("General admission 0"), "{event_page}");
    assert!(!event_page.contains(hidden_name) && !event_page.contains(&hidden.to_string()));
    for path in [
        format!("/api/v1/events/{}", fixture.event_id),
        "/api/v1/events".to_owned(),
        "/".to_owned(),
    ] {
        let body = page(path.clone()).await;
        assert!(
            !body.contains(hidden_name) && !body.contains(&hidden.to_string()),
            "{path}: {body}"
        );
    }
    // A wrong code unlocks nothing; the right one (any case) shows the type.
    let wrong = page(format!("/events/{}?code=NOT-IT", fixture.event_id)).await;
    assert!(!wrong.contains(hidden_name));
    let unlocked = page(format!("/events/{}?code=vip-room", fixture.event_id)).await;
    assert!(
        unlocked.contains(hidden_name) && unlocked.contains(&hidden.to_string()),
        "{unlocked}"
    );
    assert!(
        unlocked.contains("value=\"vip-room\""),
        "the link fills the code in"
    );

    // Buying it through the API: without the code "not found", with it sold.
    let order = |code: Option<&str>, email: &str| {
        let mut body = json!({
            "ticket_type_id": hidden, "quantity": 2, "email": email,
            "idempotency_key": Uuid::new_v4().to_string(),
        });
        if let Some(code) = code {
            body["presale_code"] = json!(code);
        }
        let client = app.client.clone();
        let url = app.url("/api/v1/orders");
        async move { client.post(url).json(&body).send().await.unwrap() }
    };
    assert_eq!(order(None, "a@example.org").await.status(), 404);
    let bad = order(Some("no spaces allowed"), "a@example.org").await;
    assert_eq!(bad.status(), 422);
    let bad: Value = bad.json().await.unwrap();
    assert_eq!(bad["error"]["field"], "presale_code");
    assert_eq!(order(Some("Vip-Room"), "a@example.org").await.status(), 201);
    assert_eq!(order(Some("VIP-ROOM"), "b@example.org").await.status(), 201);
    // Used up and unknown are one answer: a guesser cannot tell them apart.
    let used_up = order(Some("VIP-ROOM"), "c@example.org").await;
    assert_eq!(used_up.status(), 422);
    let used_up: Value = used_up.json().await.unwrap();
    let unknown = order(Some("NO-SUCH-CODE"), "c@example.org").await;
    assert_eq!(unknown.status(), 422);
    let unknown: Value = unknown.json().await.unwrap();
    assert_eq!(used_up, unknown);
    assert_eq!(used_up["error"]["field"], "presale_code");
    assert_eq!(used(&pool, "VIP-ROOM").await, 4);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn organizers_create_codes_on_the_page_and_export_them_and_bad_input_writes_nothing(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("codes@example.org").await;
    let fixture =
        common::organizer::owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    let tt = fixture.ticket_type_id().to_string();
    let path = format!("/organizer/events/{}/codes", fixture.event_id);
    let count = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM presale_codes")
            .fetch_one(&pool)
            .await
            .unwrap()
    };

    // Bad input: 422, the form filled in, the field named, nothing written.
    let resp = org
        .post_form(
            &path,
            &[("count", "5"), ("max_uses", "0"), ("ticket_type_ids", &tt)],
        )
        .await;
    assert_eq!(resp.status(), 422);
    let html = resp.text().await.unwrap();
    assert!(
        html.contains("id=\"max_uses\"") && html.contains("aria-invalid=\"true\""),
        "{html}"
    );
    assert!(
        html.contains("value=\"5\""),
        "the form comes back filled in"
    );
    let resp = org
        .post_form(&path, &[("count", "5"), ("max_uses", "3")])
        .await;
    assert_eq!(resp.status(), 422, "no ticket type chosen");
    assert_eq!(count().await, 0);

    // A batch of five generated codes.
    let resp = org
        .post_form(
            &path,
            &[("count", "5"), ("max_uses", "3"), ("ticket_type_ids", &tt)],
        )
        .await;
    assert_eq!(resp.status(), 303);
    assert_eq!(count().await, 5);
    let page = org.get(&path).await.text().await.unwrap();
    assert!(
        page.contains("5 codes created") || page.contains("0 of 3"),
        "{page}"
    );
    // One of their own, then the same again: refused on `code`.
    let resp = org
        .post_form(
            &path,
            &[
                ("code", "friends"),
                ("max_uses", "2"),
                ("ticket_type_ids", &tt),
            ],
        )
        .await;
    assert_eq!(resp.status(), 303);
    let resp = org
        .post_form(
            &path,
            &[
                ("code", "FRIENDS"),
                ("max_uses", "2"),
                ("ticket_type_ids", &tt),
            ],
        )
        .await;
    assert_eq!(resp.status(), 422);
    assert_eq!(count().await, 6);

    let csv = org.get(&format!("{path}.csv")).await;
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let csv = csv.text().await.unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "code,max_uses,used,valid_from,valid_until,ticket_types"
    );
    assert_eq!(lines.len(), 7);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("FRIENDS,2,0,,,General admission 0")),
        "{csv}"
    );

    // The API lists the same six; another organizer sees none of it.
    let listed: Value = org
        .api(
            Method::GET,
            &format!(
                "/api/v1/organizer/events/{}/presale-codes",
                fixture.event_id
            ),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["codes"].as_array().unwrap().len(), 6);
    let other = app.organizer("other@example.org").await;
    assert_eq!(other.get(&path).await.status(), 404);
    assert_eq!(other.get(&format!("{path}.csv")).await.status(), 404);
    let resp = other
        .post_form(
            &path,
            &[
                ("code", "STOLEN"),
                ("max_uses", "2"),
                ("ticket_type_ids", &tt),
            ],
        )
        .await;
    assert_eq!(resp.status(), 404);
    let resp = other
        .api(
            Method::POST,
            &format!(
                "/api/v1/organizer/events/{}/presale-codes",
                fixture.event_id
            ),
        )
        .json(&json!({"code": "STOLEN", "max_uses": 2, "ticket_type_ids": [tt]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(count().await, 6);
}

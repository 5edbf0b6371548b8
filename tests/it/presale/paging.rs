//! Finding 5: an event's presale codes have a quota, counted under the
//! event's row lock (creations at once cannot pass it together), and are
//! listed a page at a time on the page and in the API.

use super::*;

use common::{Organizer, organizer::owned_published_event};
use stampede::{clock::ManualClock, domain::Quotas, web::AppState};

/// The app with a quota of `cap` codes per event, and an organizer's
/// published event with one ticket type.
async fn app_with_cap(pool: &PgPool, cap: i64) -> (TestApp, Organizer, common::Fixture) {
    let clock = ManualClock::new(now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_list_cache_ttl(std::time::Duration::ZERO)
        .with_quotas(Quotas {
            presale_codes_per_event: cap,
            ..Quotas::default()
        });
    let app = TestApp::spawn_state(pool.clone(), clock, state).await;
    let org = app.organizer("codes@example.org").await;
    let fixture = owned_published_event(&org, &[TicketSpec::new(10, 2, 2)]).await;
    (app, org, fixture)
}

async fn codes_of(pool: &PgPool, event: Uuid) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT code FROM presale_codes WHERE event_id = $1 ORDER BY created_at, code",
    )
    .bind(event)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn api_create(org: &Organizer, fixture: &common::Fixture, body: Value) -> reqwest::Response {
    let mut body = body;
    body["max_uses"] = json!(2);
    body["ticket_type_ids"] = json!([fixture.ticket_type_id()]);
    org.api(
        Method::POST,
        &format!(
            "/api/v1/organizer/events/{}/presale-codes",
            fixture.event_id
        ),
    )
    .json(&body)
    .send()
    .await
    .unwrap()
}

#[sqlx::test]
async fn codes_past_the_events_quota_are_refused_and_nothing_is_written(pool: PgPool) {
    let (_app, org, fixture) = app_with_cap(&pool, 10).await;
    let event = fixture.event_id;
    assert_eq!(
        api_create(&org, &fixture, json!({"count": 6}))
            .await
            .status(),
        201
    );
    // 6 + 5 > 10: refused whole, on `count`.
    let refused = api_create(&org, &fixture, json!({"count": 5})).await;
    assert_eq!(refused.status(), 422);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"]["field"], "count", "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("10"),
        "{refused}"
    );
    assert_eq!(codes_of(&pool, event).await.len(), 6);
    // Up to the quota exactly, then not one more, by the API or the page.
    assert_eq!(
        api_create(&org, &fixture, json!({"count": 4}))
            .await
            .status(),
        201
    );
    let one = api_create(&org, &fixture, json!({"code": "ONE-MORE"})).await;
    assert_eq!(one.status(), 422);
    let tt = fixture.ticket_type_id().to_string();
    let page = org
        .post_form(
            &format!("/organizer/events/{event}/codes"),
            &[
                ("code", "ONE-MORE"),
                ("count", ""),
                ("max_uses", "1"),
                ("valid_from", ""),
                ("valid_until", ""),
                ("ticket_type_ids", &tt),
            ],
        )
        .await;
    assert_eq!(page.status(), 422);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("at most 10 presale codes")
    );
    assert_eq!(codes_of(&pool, event).await.len(), 10);
}

#[sqlx::test]
async fn creations_at_once_cannot_pass_the_quota_together(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 12).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 2, 2)]).await;
    let quotas = Quotas {
        presale_codes_per_event: 10,
        ..Quotas::default()
    };
    let input = CodeInput {
        count: "2".into(),
        max_uses: "1".into(),
        ticket_type_ids: vec![fixture.ticket_type_id().to_string()],
        ..CodeInput::default()
    };
    let (organizer, event) = (fixture.organizer_id, fixture.event_id);
    let results =
        join_all((0..10).map(|_| {
            // Each parse draws codes of its own.
            let (pool, new) = (
                pool.clone(),
                input.parse(&stampede::domain::Zone::utc()).unwrap(),
            );
            async move {
                db::presale::create(&pool, organizer.into(), event.into(), &quotas, &new).await
            }
        }))
        .await;
    let made = results.iter().filter(|r| r.is_ok()).count();
    for refused in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(
            matches!(refused, AppError::Invalid(field) if field.field == "count"),
            "{refused:?}"
        );
    }
    assert_eq!(made, 5);
    assert_eq!(codes_of(&pool, fixture.event_id).await.len(), 10);
}

#[sqlx::test]
async fn the_code_list_is_paged_and_every_code_comes_once(pool: PgPool) {
    let (_app, org, fixture) = app_with_cap(&pool, 10_000).await;
    let event = fixture.event_id;
    assert_eq!(
        api_create(&org, &fixture, json!({"count": 105}))
            .await
            .status(),
        201
    );
    assert_eq!(
        api_create(&org, &fixture, json!({"code": "LAST-ONE"}))
            .await
            .status(),
        201
    );
    let all = codes_of(&pool, event).await;
    assert_eq!(all.len(), 106);

    // The API, 40 at a time, following `next`.
    let list = format!("/api/v1/organizer/events/{event}/presale-codes");
    let (mut seen, mut after, mut pages) = (Vec::<String>::new(), None::<String>, 0);
    loop {
        let query = match &after {
            Some(next) => format!("?limit=40&after={next}"),
            None => "?limit=40".to_owned(),
        };
        let resp = org
            .api(Method::GET, &format!("{list}{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let page: Value = resp.json().await.unwrap();
        let codes = page["codes"].as_array().unwrap();
        assert!(codes.len() <= 40);
        seen.extend(codes.iter().map(|c| c["code"].as_str().unwrap().to_owned()));
        pages += 1;
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, all, "every code once, in order");
    // Without `limit`: 100, then the rest.
    let first: Value = org
        .api(Method::GET, &list)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["codes"].as_array().unwrap().len(), 100);

    // The page: 100 codes and a link to the rest.
    let base = format!("/organizer/events/{event}/codes");
    let shown = |html: &str| -> Vec<String> {
        all.iter()
            .filter(|code| html.contains(&format!("<code>{code}</code>")))
            .cloned()
            .collect()
    };
    let page = org.get(&base).await.text().await.unwrap();
    let first_page = shown(&page);
    assert_eq!(first_page.len(), 100);
    let next = page
        .split("rel=\"next\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a link to the next page")
        .replace("&amp;", "&");
    let page = org.get(&next).await.text().await.unwrap();
    let second_page = shown(&page);
    assert_eq!(second_page.len(), 6);
    assert!(!page.contains("rel=\"next\""));
    assert!(first_page.iter().all(|c| !second_page.contains(c)));

    // The CSV still has every code.
    let csv = org.get(&format!("{base}.csv")).await.text().await.unwrap();
    assert_eq!(csv.lines().count(), 107);
}

#[sqlx::test]
async fn bad_page_parameters_are_refused_naming_them(pool: PgPool) {
    let (_app, org, fixture) = app_with_cap(&pool, 10).await;
    let event = fixture.event_id;
    for path in [
        format!("/api/v1/organizer/events/{event}/presale-codes"),
        format!("/api/v1/organizer/events/{event}/waiting-list"),
    ] {
        for (query, field) in [
            ("limit=0", "limit"),
            ("limit=501", "limit"),
            ("limit=ten", "limit"),
            ("after=not-a-cursor", "after"),
            ("page=2", "page"),
            ("limit=1&limit=2", "limit"),
        ] {
            let resp = org
                .api(Method::GET, &format!("{path}?{query}"))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 422, "{path}?{query}");
            let body: Value = resp.json().await.unwrap();
            assert_eq!(body["error"]["field"], field, "{path}?{query}");
        }
    }
    for path in [
        format!("/organizer/events/{event}/codes?after=junk"),
        format!("/organizer/events/{event}/waiting-list?after=junk"),
    ] {
        let status = org.get(&path).await.status();
        assert!(status.is_client_error(), "{path}: {status}");
    }
}

//! Check-in at the door: staff links, the scanner page, the organizer API's
//! redeem, search and check-in list, and who may reach each of them. Every
//! answer is checked against the tickets table.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use stampede::clock::Clock as _;
use time::{Duration as Span, OffsetDateTime, format_description::well_known::Rfc3339};
use uuid::Uuid;

use crate::{
    common::{checkin::*, organizer::*, *},
    http::support::*,
};

fn rfc3339(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().unwrap(), &Rfc3339).unwrap()
}

async fn page(resp: reqwest::Response) -> String {
    assert_eq!(resp.status(), StatusCode::OK);
    resp.text().await.unwrap()
}

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

    // No account: the link alone opens the scanner.
    let scanner = page(
        app.client
            .get(app.url(&format!("/door?s={secret}")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(scanner.contains("Door: North gate"), "{scanner}");
    assert_eq!(result_on_page(&scanner), None);

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
async fn the_api_answers_every_scan_with_a_stable_reason_code(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("api-door@example.org").await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let other = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let codes = bought_codes(&app, event.ticket_type_id(), 2, "guest@example.org").await;
    let elsewhere = bought_codes(&app, other.ticket_type_id(), 1, "guest@example.org").await;
    let (order, secret) =
        api_buy_with_secret(&app, event.ticket_type_id(), 1, "gone@example.org").await;
    let cancelled = ticket_codes(&pool, order).await;
    let resp = app
        .client
        .post(app.url(&format!("/api/v1/orders/{order}/cancel?s={secret}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let id = event.event_id;

    let first = nonce();
    let ok = redeem_code(&org, id, &codes[0], "East", &first).await;
    assert_eq!(ok["result"], "ok", "{ok}");
    assert_eq!(ok["ticket_type"], "General admission 0");
    assert_eq!(ok["door"], "East");
    assert_eq!(ok["replayed"], false);
    let at = rfc3339(&ok["redeemed_at"]);

    let twice = redeem_code(&org, id, &codes[0], "West", &nonce()).await;
    assert_eq!(twice["result"], "already_redeemed", "{twice}");
    assert_eq!(twice["door"], "East");
    assert_eq!(rfc3339(&twice["redeemed_at"]), at);

    let retry = redeem_code(&org, id, &codes[0], "East", &first).await;
    assert_eq!(retry["result"], "ok", "{retry}");
    assert_eq!(retry["replayed"], true);
    assert_eq!(rfc3339(&retry["redeemed_at"]), at);

    let wrong = redeem_code(&org, id, &elsewhere[0], "East", &nonce()).await;
    assert_eq!(wrong["result"], "wrong_event", "{wrong}");
    assert!(
        wrong["ticket_type"].is_null(),
        "nothing of the other event: {wrong}"
    );
    assert_eq!(redeemed(&pool, &elsewhere[0]).await, (None, None));

    let refused = redeem_code(&org, id, &cancelled[0], "East", &nonce()).await;
    assert_eq!(refused["result"], "order_cancelled", "{refused}");
    assert_eq!(redeemed(&pool, &cancelled[0]).await, (None, None));

    let unknown = redeem_code(&org, id, "0000FFFF", "East", &nonce()).await;
    assert_eq!(unknown["result"], "unknown", "{unknown}");
    assert_eq!(redeemed_count(&pool).await, 1);

    // Bad requests are refused with the field named and write nothing.
    let scans = scan_count(&pool).await;
    let n = nonce();
    let cases = [
        (
            json!({"code": codes[1], "door": "East", "nonce": n, "extra": 1}),
            "extra",
        ),
        (json!({"code": codes[1], "door": "East"}), "nonce"),
        (
            json!({"code": codes[1], "door": "East", "nonce": "short"}),
            "nonce",
        ),
        (json!({"code": "12%34", "door": "East", "nonce": n}), "code"),
        (json!({"code": codes[1], "door": " ", "nonce": n}), "door"),
    ];
    for (body, field) in cases {
        assert_invalid(api_redeem(&org, id, &body).await, field).await;
    }
    let reused = api_redeem(
        &org,
        id,
        &json!({"code": codes[1], "door": "East", "nonce": first}),
    )
    .await;
    assert_api_error(
        reused,
        StatusCode::CONFLICT,
        "nonce_conflict",
        Some("nonce"),
    )
    .await;
    assert_eq!(scan_count(&pool).await, scans);
    assert_eq!(redeemed(&pool, &codes[1]).await, (None, None));

    // A cancelled event's tickets are all refused.
    let resp = org
        .post_form(&format!("/organizer/events/{id}/cancel"), &[])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let after = redeem_code(&org, id, &codes[1], "East", &nonce()).await;
    assert_eq!(after["result"], "order_cancelled", "{after}");
    assert_eq!(redeemed(&pool, &codes[1]).await, (None, None));
}

#[sqlx::test]
async fn every_check_in_route_refuses_a_missing_token_another_organizer_and_a_dead_staff_link(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let owner = app.organizer("owner@example.org").await;
    let intruder = app.organizer("intruder@example.org").await;
    let event = owned_published_event(&owner, &[TicketSpec::new(10, 4, 8)]).await;
    let code = bought_codes(&app, event.ticket_type_id(), 1, "guest@example.org").await[0].clone();
    let id = event.event_id;
    let now = app.clock.now();
    let secret = door_link(&owner, id, "Main", now).await;
    let link = door_link_id(&pool, &secret).await;
    let redeem_body = json!({"code": code, "door": "Main", "nonce": nonce()});
    let api_routes = [
        (
            Method::POST,
            format!("/api/v1/organizer/events/{id}/check-ins"),
        ),
        (
            Method::GET,
            format!("/api/v1/organizer/events/{id}/check-ins"),
        ),
        (
            Method::GET,
            format!(
                "/api/v1/organizer/events/{id}/tickets?code_prefix={}",
                &code[..4]
            ),
        ),
    ];
    let before = snapshot(&pool).await;

    // The API: no token is 401, another organizer's token 404.
    for (method, path) in &api_routes {
        let resp = app
            .client
            .request(method.clone(), app.url(path))
            .json(&redeem_body)
            .send()
            .await
            .unwrap();
        assert_unauthorized_json(resp, &format!("{method} {path}")).await;
        let resp = intruder
            .api(method.clone(), path)
            .json(&redeem_body)
            .send()
            .await
            .unwrap();
        assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;
    }
    let resp = intruder
        .api(Method::GET, "/api/v1/organizer/events/not-an-id/check-ins")
        .send()
        .await
        .unwrap();
    assert_api_error(resp, StatusCode::NOT_FOUND, "not_found", None).await;

    // The dashboard's forms: no session goes to log in, another organizer
    // finds nothing.
    let create = format!("/organizer/events/{id}/door-links");
    let revoke = format!("/organizer/events/{id}/door-links/{link}/revoke");
    let fields = [
        ("door", "Side"),
        ("valid_from", &form_time(now)),
        ("valid_until", &form_time(now + Span::hours(2))),
    ];
    for path in [&create, &revoke] {
        let resp = app.post_form(path, &fields).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(location(&resp), login_redirect(path));
        let resp = intruder.post_form(path, &fields).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let resp = intruder
        .post_form(
            &format!(
                "/organizer/events/{}/door-links/{link}/revoke",
                Uuid::new_v4()
            ),
            &[],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(snapshot(&pool).await, before, "a refused request wrote");

    // Links that are not (or no longer) live open nothing.
    let scanner = |s: String| {
        let app = &app;
        async move {
            app.client
                .get(app.url(&format!("/door?s={s}")))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(scanner(secret.clone()).await, StatusCode::OK);
    for bad in ["", "short", &"A".repeat(43)] {
        assert_eq!(
            scanner(bad.to_owned()).await,
            StatusCode::NOT_FOUND,
            "{bad}"
        );
    }
    let resp = app.client.get(app.url("/door")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    // Expired, and not yet valid: by the app's clock.
    app.clock.set(now + Span::days(2));
    assert_eq!(scanner(secret.clone()).await, StatusCode::NOT_FOUND);
    let resp = door_scan(&app, &secret, &code, &nonce()).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    app.clock.set(now - Span::hours(2));
    assert_eq!(scanner(secret.clone()).await, StatusCode::NOT_FOUND);
    app.clock.set(now);
    assert_eq!(redeemed_count(&pool).await, 0);

    // Revoked by its organizer: gone, and a second revoke finds nothing.
    let resp = owner.post_form(&revoke, &[]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let dashboard = page(owner.get(&format!("/organizer/events/{id}")).await).await;
    assert!(dashboard.contains("revoked"), "{dashboard}");
    assert_eq!(scanner(secret.clone()).await, StatusCode::NOT_FOUND);
    let resp = door_scan(&app, &secret, &code, &nonce()).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        owner.post_form(&revoke, &[]).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(redeemed_count(&pool).await, 0);
    assert_eq!(scan_count(&pool).await, 0);
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

/// Walk a JSON list of `base` by its `next` cursor (`param=next`, starting
/// from `start`) until the page says it was the last; the rows under `key`.
async fn walk_from(
    org: &Organizer,
    base: &str,
    param: &str,
    start: Option<&str>,
    key: &str,
) -> Vec<Value> {
    let mut rows = Vec::new();
    let first = base;
    let mut path = match start {
        Some(cursor) => format!("{base}&{param}={cursor}"),
        None => base.to_owned(),
    };
    for _ in 0..100 {
        let resp = org.api(Method::GET, &path).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        let body: Value = resp.json().await.unwrap();
        rows.extend(body[key].as_array().unwrap().iter().cloned());
        let more = match key {
            "check_ins" => body["more"] == true,
            _ => !body["next"].is_null(),
        };
        if !more {
            return rows;
        }
        let next = body["next"].as_str().unwrap();
        path = format!("{first}&{param}={next}");
    }
    panic!("more than 100 pages");
}

async fn walk(org: &Organizer, base: &str, param: &str, key: &str) -> Vec<Value> {
    walk_from(org, base, param, None, key).await
}

#[sqlx::test]
async fn tickets_are_found_by_code_prefix_or_email_and_check_ins_listed_since_a_cursor(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("lists@example.org").await;
    let event = owned_published_event(&org, &[TicketSpec::new(20, 4, 8)]).await;
    let id = event.event_id;
    let mut ada = bought_codes(&app, event.ticket_type_id(), 4, "ada@example.org").await;
    ada.extend(bought_codes(&app, event.ticket_type_id(), 1, "ada@example.org").await);
    let bob = bought_codes(&app, event.ticket_type_id(), 1, "bob@example.org").await;
    ada.sort();

    let base = format!("/api/v1/organizer/events/{id}/tickets");
    let found = walk(
        &org,
        &format!("{base}?email=ADA@example.org&limit=2"),
        "after",
        "tickets",
    )
    .await;
    let found: Vec<&str> = found.iter().map(|t| t["code"].as_str().unwrap()).collect();
    assert_eq!(found, ada, "each of ada's tickets once, in code order");
    let prefix = &bob[0][..6];
    let found = walk(
        &org,
        &format!("{base}?code_prefix={}", prefix.to_lowercase()),
        "after",
        "tickets",
    )
    .await;
    assert!(
        found
            .iter()
            .all(|t| t["code"].as_str().unwrap().starts_with(prefix))
    );
    assert!(
        found
            .iter()
            .any(|t| t["code"] == bob[0] && t["email"] == "bob@example.org")
    );
    for (query, field) in [
        ("", "code_prefix"),
        ("?code_prefix=ABC", "code_prefix"),
        ("?code_prefix=ABCD&email=a@example.org", "code_prefix"),
        ("?email=nobody", "email"),
        ("?email=a@example.org&limit=0", "limit"),
        ("?email=a@example.org&colour=red", "colour"),
    ] {
        let resp = org
            .api(Method::GET, &format!("{base}{query}"))
            .send()
            .await
            .unwrap();
        assert_invalid(resp, field).await;
    }

    // The check-ins, a page of one at a time, each once and in order.
    for code in &ada[..3] {
        redeem_code(&org, id, code, "North", &nonce()).await;
    }
    let list = format!("/api/v1/organizer/events/{id}/check-ins?limit=1");
    let seen = until_listed(&org, &list, None, 3).await;
    let codes: Vec<&str> = seen.iter().map(|c| c["code"].as_str().unwrap()).collect();
    let mut sorted = codes.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ada[..3].iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert!(seen.iter().all(|c| c["door"] == "North"));
    rfc3339(&seen[0]["redeemed_at"]);

    // Two more: a device going on from its last cursor gets only these.
    let cursor = seen[2]["cursor"].as_str().unwrap().to_owned();
    redeem_code(&org, id, &ada[3], "South", &nonce()).await;
    redeem_code(&org, id, &bob[0], "South", &nonce()).await;
    let newer = until_listed(&org, &list, Some(&cursor), 2).await;
    let mut codes: Vec<&str> = newer.iter().map(|c| c["code"].as_str().unwrap()).collect();
    codes.sort();
    let mut expected = vec![ada[3].as_str(), bob[0].as_str()];
    expected.sort();
    assert_eq!(codes, expected);
    let resp = org
        .api(Method::GET, &format!("{list}&since=nonsense"))
        .send()
        .await
        .unwrap();
    assert_invalid(resp, "since").await;
}

/// Walk the check-in list until it holds `expected` rows. A redemption is
/// listed once every transaction older than it has ended (on the whole
/// server, other tests' included), so the walk is repeated, a bounded
/// number of times, until the rows are there.
async fn until_listed(
    org: &Organizer,
    base: &str,
    since: Option<&str>,
    expected: usize,
) -> Vec<Value> {
    for _ in 0..600 {
        let rows = walk_from(org, base, "since", since, "check_ins").await;
        assert!(rows.len() <= expected, "listed twice: {rows:?}");
        if rows.len() == expected {
            return rows;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the check-ins were never listed");
}

#[sqlx::test]
async fn the_dashboard_counts_checked_in_of_sold_per_ticket_type(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("counts@example.org").await;
    let event = owned_published_event(
        &org,
        &[TicketSpec::new(10, 4, 8), TicketSpec::new(10, 4, 8)],
    )
    .await;
    let codes = bought_codes(&app, event.ticket_type_ids[0], 3, "a@example.org").await;
    bought_codes(&app, event.ticket_type_ids[1], 1, "b@example.org").await;
    for code in &codes[..2] {
        redeem_code(&org, event.event_id, code, "Main", &nonce()).await;
    }
    let html = page(
        org.get(&format!("/organizer/events/{}", event.event_id))
            .await,
    )
    .await;
    let cell = |row: &str| {
        let start = html.find(row).unwrap_or_else(|| panic!("no {row}"));
        let rest = &html[start..];
        let marker = "class=\"num checked-in\">";
        let from = rest.find(marker).unwrap() + marker.len();
        rest[from..from + rest[from..].find('<').unwrap()].to_owned()
    };
    assert_eq!(
        cell(&format!(
            "data-ticket-type=\"{}\"",
            event.ticket_type_ids[0]
        )),
        "2 / 3"
    );
    assert_eq!(
        cell(&format!(
            "data-ticket-type=\"{}\"",
            event.ticket_type_ids[1]
        )),
        "0 / 1"
    );
    assert_eq!(cell("class=\"totals\""), "2 / 4");
}

#[sqlx::test]
async fn a_check_in_that_commits_late_is_still_listed_after_the_cursor(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("late@example.org").await;
    let event = owned_published_event(&org, &[TicketSpec::new(10, 4, 8)]).await;
    let codes = bought_codes(&app, event.ticket_type_id(), 2, "guest@example.org").await;
    let id = event.event_id;
    // A redemption in flight: its transaction took its id first, and
    // commits after a faster one.
    let mut slow = pool.begin().await.unwrap();
    sqlx::query(
        "UPDATE tickets SET redeemed_at = now(), redeemed_door = 'Slow',
                redeemed_seq = pg_current_xact_id()::text::bigint
         WHERE code = $1",
    )
    .bind(&codes[0])
    .execute(&mut *slow)
    .await
    .unwrap();
    redeem_code(&org, id, &codes[1], "Fast", &nonce()).await;
    // The list holds the fast one back while the slow one is in flight, so
    // the cursor a device keeps cannot pass the slow one.
    let list = format!("/api/v1/organizer/events/{id}/check-ins?limit=10");
    let resp = org.api(Method::GET, &list).send().await.unwrap();
    let page: Value = resp.json().await.unwrap();
    let cursor = page["next"].as_str().map(str::to_owned);
    slow.commit().await.unwrap();
    let mut seen = page["check_ins"].as_array().unwrap().clone();
    seen.extend(until_listed(&org, &list, cursor.as_deref(), 2 - seen.len()).await);
    let doors: Vec<&str> = seen.iter().map(|c| c["door"].as_str().unwrap()).collect();
    assert_eq!(doors, ["Slow", "Fast"], "each once, in commit-safe order");
}

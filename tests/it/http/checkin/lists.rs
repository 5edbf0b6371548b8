//! Finding tickets, listing check-ins since a cursor, the dashboard's counts.

use super::*;

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

//! The position poll without Postgres (issue 37): once an entry is ranked,
//! its poll hands out a token carrying the rank, and polls with that token
//! are answered from it and the room's admitted-up-to mark, which each
//! instance reads at most once a second whatever the number of polls.

use super::*;

async fn poll(app: &TestApp, event_id: Uuid, token: &str) -> (StatusCode, Value) {
    let resp = app
        .client
        .get(app.url(&format!("/api/v1/events/{event_id}/queue")))
        .header("stampede-queue-entry", token)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

#[sqlx::test]
async fn a_ranked_poll_is_answered_from_its_token_and_the_rooms_mark(pool: PgPool) {
    let key = RoomKey::random();
    let (app, fixture) = queued_app(&pool, &key).await;
    let event_id = fixture.event_id;
    let proof = api_proof(&app.client, &app, event_id).await;
    let (status, joined) = api_join(&app, event_id, Some(json!({ "proof": proof })), None).await;
    assert_eq!(status, StatusCode::CREATED, "{joined}");
    let plain = joined["token"].as_str().unwrap().to_owned();
    let entry = Uuid::parse_str(joined["entry_id"].as_str().unwrap()).unwrap();

    // The admitter has ranked it 700th and let in ranks 1 and 2 (far from
    // the front: the room admits one a second, so only ranks within ten of
    // the mark read their entry).
    sqlx::query("UPDATE queue_entries SET rank = 700 WHERE id = $1")
        .bind(entry)
        .execute(&pool)
        .await
        .unwrap();
    let set_mark = |upto: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query(
                "UPDATE waiting_rooms SET shuffled_at = coalesce(shuffled_at, now()),
                        ranked = greatest(ranked, 1000), admitted_upto = $2 WHERE event_id = $1",
            )
            .bind(event_id)
            .bind(upto)
            .execute(&pool)
            .await
            .unwrap();
        }
    };
    set_mark(2).await;

    // The first poll reads the entry and hands out the ranked token.
    let (status, first) = poll(&app, event_id, &plain).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(
        (&first["state"], &first["ahead"]),
        (&json!("waiting"), &json!(697)),
        "{first}"
    );
    let ranked = first["entry_token"]
        .as_str()
        .expect("a ranked token")
        .to_owned();
    assert_ne!(ranked, plain);

    // With it, the same answer, and no new token.
    let (_, second) = poll(&app, event_id, &ranked).await;
    assert_eq!(
        (&second["state"], &second["ahead"]),
        (&json!("waiting"), &json!(697)),
        "{second}"
    );
    assert!(second.get("entry_token").is_none(), "{second}");

    // The entry's row is not read: a rank changed behind its back (which
    // the admitter never does) shows to the plain token only.
    sqlx::query("UPDATE queue_entries SET rank = 900 WHERE id = $1")
        .bind(entry)
        .execute(&pool)
        .await
        .unwrap();
    let (_, from_row) = poll(&app, event_id, &plain).await;
    assert_eq!(from_row["ahead"], 897, "{from_row}");
    let (_, from_token) = poll(&app, event_id, &ranked).await;
    assert_eq!(from_token["ahead"], 697, "{from_token}");
    sqlx::query("UPDATE queue_entries SET rank = 700 WHERE id = $1")
        .bind(entry)
        .execute(&pool)
        .await
        .unwrap();

    // The mark moves: the instance learns it within about a second.
    set_mark(500).await;
    let mut ahead = json!(null);
    for _ in 0..60 {
        ahead = poll(&app, event_id, &ranked).await.1["ahead"].clone();
        if ahead == 199 {
            break;
        }
        tokio::time::sleep(StdDuration::from_millis(100)).await;
    }
    assert_eq!(ahead, 199, "the mark did not reach the poll");

    // Near the front the entry is read: a change shows at once.
    set_mark(695).await;
    sqlx::query("UPDATE queue_entries SET rank = 698 WHERE id = $1")
        .bind(entry)
        .execute(&pool)
        .await
        .unwrap();
    // (the token says 700: 4 ahead; the row says 698: 2 ahead)
    let mut near = json!(null);
    for _ in 0..60 {
        near = poll(&app, event_id, &ranked).await.1["ahead"].clone();
        if near == 2 {
            break;
        }
        tokio::time::sleep(StdDuration::from_millis(100)).await;
    }
    assert_eq!(near, 2, "near the front the entry was not read");
    sqlx::query("UPDATE queue_entries SET rank = 700 WHERE id = $1")
        .bind(entry)
        .execute(&pool)
        .await
        .unwrap();

    // Admitted: the pass comes from the entry's row.
    sqlx::query("UPDATE queue_entries SET admitted_at = now(), pass_expires_at = $2 WHERE id = $1")
        .bind(entry)
        .bind(app.clock.now() + Duration::minutes(10))
        .execute(&pool)
        .await
        .unwrap();
    set_mark(700).await;
    let mut admitted = json!(null);
    for _ in 0..60 {
        admitted = poll(&app, event_id, &ranked).await.1;
        if admitted["state"] == "admitted" {
            break;
        }
        tokio::time::sleep(StdDuration::from_millis(100)).await;
    }
    assert_eq!(admitted["state"], "admitted", "{admitted}");
    assert!(admitted["pass"].is_string(), "{admitted}");

    // A token claiming a better place is refused.
    let mut forged: Vec<&str> = ranked.split('.').collect();
    forged[1] = "1";
    let (status, _) = poll(&app, event_id, &forged.join(".")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

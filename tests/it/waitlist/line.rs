//! The line: what comes back goes to the first in line, once, in order.

use super::*;

#[sqlx::test]
async fn two_hundred_buyers_ten_held_tickets_and_the_line_gets_what_comes_back_in_order(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect.clone(), 20).await;
    let other_instance = common::pool(connect, 5).await;
    let fixture = published_event(&pool, &[TicketSpec::new(10, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    hold_for(&pool, fixture.event_id, 600).await;
    let key = ConfirmKey::random();
    let sales = engine(&pool, &key);
    let t0 = now();

    // While tickets are on sale, there is no list to join.
    let early = try_join(&pool, &key, &fixture, "early@example.org", 1, t0).await;
    assert!(matches!(early, Err(AppError::NotSoldOut)), "{early:?}");

    let (held, refused) = burst(&sales, tt, t0, "buyer", 200).await;
    assert_eq!((held.len(), refused), (10, 190));
    assert_eq!(remaining(&pool, tt).await, 0);

    // Twenty people join at once, and confirm their addresses one after
    // another: the line is in that order. One never confirms, one leaves.
    let emails: Vec<String> = (0..20).map(|i| format!("late{i}@example.org")).collect();
    let joins = join_all(
        emails
            .iter()
            .map(|email| try_join(&pool, &key, &fixture, email, 1, t0)),
    )
    .await;
    let entries: Vec<WaitlistEntryId> = joins
        .into_iter()
        .map(|joined| match joined.unwrap() {
            Joined::New(entry) => entry,
            Joined::Already => panic!("a fresh address had a place"),
        })
        .collect();
    let (unconfirmed, leaving) = (entries[3], entries[5]);
    for &entry in &entries {
        if entry != unconfirmed {
            db::waitlist::confirm(&pool, t0, entry, &key.waitlist_token(entry))
                .await
                .unwrap();
        }
    }
    db::waitlist::leave(&pool, leaving, &key.waitlist_token(leaving))
        .await
        .unwrap();
    let line: Vec<Uuid> = entries
        .iter()
        .filter(|&&e| e != unconfirmed && e != leaving)
        .map(|e| e.get())
        .collect();
    assert_eq!(line.len(), 18);
    // A second join by one address in line writes nothing.
    let again = try_join(&pool, &key, &fixture, "LATE0@example.org", 1, t0).await;
    assert!(matches!(again, Ok(Joined::Already)), "{again:?}");

    // Half of the holds are confirmed; the others expire, swept by two
    // instances at once.
    let (confirming, lapsing) = held.split_at(5);
    for order in confirming {
        sale::confirm(&pool, t0 + Span::minutes(1), order.id, &key.token(order.id))
            .await
            .unwrap();
    }
    let after = t0 + Span::seconds(601);
    assert_eq!(two_sweepers(&pool, &other_instance, after).await, 5);
    // The five came back and went straight to the first five in line, in
    // the sweep's transaction: never on sale, so a buyer right after the
    // sweep finds none.
    assert_eq!(remaining(&pool, tt).await, 0);
    let first = offered(&pool, tt).await;
    assert_eq!(
        first.iter().map(|(entry, _)| *entry).collect::<Vec<_>>(),
        line[..5]
    );
    let bot = sales
        .purchase(after, &purchase_request(tt, 1, "bot@example.org"))
        .await;
    assert!(
        matches!(bot, Err(AppError::SoldOut | AppError::NotEnoughLeft { .. })),
        "{bot:?}"
    );
    for (entry, order_id) in &first {
        let (status, quantity, ends): (String, i32, OffsetDateTime) =
            sqlx::query_as("SELECT status, quantity, hold_expires_at FROM orders WHERE id = $1")
                .bind(order_id)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!((status.as_str(), quantity), ("held", 1));
        assert!((ends - (after + Span::seconds(600))).abs() < Span::microseconds(1));
        // Its mail is asked for, and says it is an offer from the list.
        let asked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox WHERE kind = 'order.created' AND order_id = $1
               AND payload->>'waitlist_entry_id' = $2::text AND payload->>'status' = 'held'",
        )
        .bind(order_id)
        .bind(entry)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(asked, 1);
    }
    assert_invariants(&pool).await;

    // Two of the offers are confirmed with the mailed link; the other three
    // expire, and move on to the next three in line.
    let second = after + Span::minutes(1);
    for (entry, order_id) in &first[..2] {
        let token = key.waitlist_token((*entry).into());
        let answer = sale::confirm(&pool, second, OrderId::from(*order_id), &token)
            .await
            .unwrap();
        assert!(matches!(answer, Confirmed::Now(_)), "{answer:?}");
    }
    let later = after + Span::seconds(601);
    assert_eq!(two_sweepers(&pool, &other_instance, later).await, 3);
    assert_eq!(remaining(&pool, tt).await, 0);
    let all = offered(&pool, tt).await;
    assert_eq!(
        all.iter().map(|(entry, _)| *entry).collect::<Vec<_>>(),
        line[..8]
    );
    // Every expired hold gave its ticket back exactly once: eight expiries,
    // one message each, and the stock adds up.
    let expired = messages(&pool, "order.expired").await;
    assert_eq!(expired.len(), 8, "{expired:?}");
    assert!(expired.iter().all(|(_, n)| *n == 1), "{expired:?}");
    let mut lapsed: Vec<Uuid> = lapsing.iter().map(|o| o.id.get()).collect();
    lapsed.extend(first[2..].iter().map(|(_, order)| *order));
    lapsed.sort();
    assert_eq!(
        expired.iter().map(|(order, _)| *order).collect::<Vec<_>>(),
        lapsed
    );
    assert_eq!(entry_status(&pool, unconfirmed).await, "unconfirmed");
    assert_eq!(entry_status(&pool, leaving).await, "left");
    assert_invariants(&pool).await;
    // The place never confirmed does not block its address for good: an
    // hour on, joining again replaces it (and so mails a new link).
    let soon = try_join(&pool, &key, &fixture, &emails[3], 1, t0 + Span::minutes(30)).await;
    assert!(matches!(soon, Ok(Joined::Already)), "{soon:?}");
    let later = try_join(&pool, &key, &fixture, &emails[3], 1, t0 + Span::minutes(61)).await;
    assert!(matches!(later, Ok(Joined::New(_))), "{later:?}");
    assert_eq!(entry_status(&pool, unconfirmed).await, "left");
}

#[sqlx::test]
async fn a_cancel_a_raised_capacity_and_the_switch_serve_the_line(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 10).await;
    // Orders are confirmed at once: offers are still held (10 minutes).
    let fixture = published_event(&pool, &[TicketSpec::new(2, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    let key = ConfirmKey::random();
    let sales = engine(&pool, &key);
    let at = now();
    let mut secrets = Vec::new();
    for email in ["ada@example.org", "bob@example.org"] {
        let bought = sales
            .purchase(at, &purchase_request(tt, 1, email))
            .await
            .unwrap();
        secrets.push((bought.order().id, bought.cancel_secret().unwrap().clone()));
    }
    // Ada, who holds her limit already, is first in line: she is passed over.
    let ada = join_line(&pool, &key, &fixture, "Ada@Example.org", at).await;
    let cyd = join_line(&pool, &key, &fixture, "cyd@example.org", at).await;
    let dee = join_line(&pool, &key, &fixture, "dee@example.org", at).await;
    let eve = join_line(&pool, &key, &fixture, "eve@example.org", at).await;

    // Bob cancels: Cyd gets his ticket, held for ten minutes.
    let (bob_order, bob_secret) = &secrets[1];
    sale::cancel(&pool, at, *bob_order, Some(bob_secret))
        .await
        .unwrap();
    assert_eq!(entry_status(&pool, ada).await, "passed");
    assert_eq!(entry_status(&pool, cyd).await, "offered");
    assert_eq!(remaining(&pool, tt).await, 0);
    let offer: (String, OffsetDateTime) = sqlx::query_as(
        "SELECT o.status, o.hold_expires_at FROM orders o
         JOIN waitlist_entries w ON w.order_id = o.id WHERE w.id = $1",
    )
    .bind(cyd.get())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(offer.0, "held");
    assert!((offer.1 - (at + Span::minutes(10))).abs() < Span::microseconds(1));

    // The organizer raises the capacity: the new ticket goes to Dee.
    set_capacity(&pool, &fixture, 3).await.unwrap();
    assert_eq!(entry_status(&pool, dee).await, "offered");
    assert_eq!(remaining(&pool, tt).await, 0);
    assert_invariants(&pool).await;

    // Offers off: Ada's cancelled ticket goes back on sale; Eve waits.
    let organizer = fixture.organizer_id.into();
    let event = fixture.event_id.into();
    assert_eq!(
        db::waitlist::set_offers(&pool, organizer, event, false, at)
            .await
            .unwrap(),
        0
    );
    let (ada_order, ada_secret) = &secrets[0];
    sale::cancel(&pool, at, *ada_order, Some(ada_secret))
        .await
        .unwrap();
    assert_eq!(remaining(&pool, tt).await, 1);
    assert_eq!(entry_status(&pool, eve).await, "waiting");
    // Another organizer cannot touch the switch.
    let stranger = common::fixture_organizer(&pool).await;
    let refused = db::waitlist::set_offers(&pool, stranger.into(), event, true, at).await;
    assert!(matches!(refused, Err(AppError::NotFound)), "{refused:?}");
    // Offers on again: what is on sale goes to Eve at once.
    assert_eq!(
        db::waitlist::set_offers(&pool, organizer, event, true, at)
            .await
            .unwrap(),
        1
    );
    assert_eq!(entry_status(&pool, eve).await, "offered");
    assert_eq!(remaining(&pool, tt).await, 0);
    let lists = db::waitlist::list(&pool, organizer, event, &Default::default())
        .await
        .unwrap();
    assert!(lists.offers_on);
    assert_eq!(lists.entries.len(), 4);
    assert_eq!(lists.waiting(tt.into()), 0);
    assert_invariants(&pool).await;
    // Eve declines: the place's token releases the offer (the page's
    // "Release them"), and with nobody left in line the ticket goes on sale.
    let eve_order = lists
        .entries
        .iter()
        .find(|e| e.id == eve)
        .and_then(|e| e.order_id)
        .unwrap();
    let token = key.waitlist_token(eve);
    let released = CancelSecret::parse(token.as_str()).unwrap();
    sale::cancel(&pool, at, eve_order, Some(&released))
        .await
        .unwrap();
    assert_eq!(remaining(&pool, tt).await, 1);
    let late = sale::confirm(&pool, at, eve_order, &token).await;
    assert!(matches!(late, Err(AppError::AlreadyCancelled)), "{late:?}");
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn twenty_cancels_at_once_make_one_offer_to_each_of_twenty_in_line(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 25).await;
    let fixture = published_event(&pool, &[TicketSpec::new(20, 1, 1)]).await;
    let tt = fixture.ticket_type_id();
    let key = ConfirmKey::random();
    let sales = engine(&pool, &key);
    let at = now();
    let mut bought = Vec::new();
    for i in 0..20 {
        let purchase = sales
            .purchase(
                at,
                &purchase_request(tt, 1, &format!("holder{i}@example.org")),
            )
            .await
            .unwrap();
        bought.push((
            purchase.order().id,
            purchase.cancel_secret().unwrap().clone(),
        ));
    }
    let mut line = Vec::new();
    for i in 0..25 {
        line.push(join_line(&pool, &key, &fixture, &format!("fan{i}@example.org"), at).await);
    }
    let cancels = join_all(
        bought
            .iter()
            .map(|(order, secret): &(OrderId, CancelSecret)| {
                sale::cancel(&pool, at, *order, Some(secret))
            }),
    )
    .await;
    assert!(cancels.iter().all(Result::is_ok), "{cancels:?}");
    // Each cancel's transaction offered its ticket to the first in line at
    // its commit: twenty offers, to the first twenty, one each.
    assert_eq!(remaining(&pool, tt).await, 0);
    let got: Vec<Uuid> = offered(&pool, tt)
        .await
        .into_iter()
        .map(|(e, _)| e)
        .collect();
    let first: Vec<Uuid> = line[..20].iter().map(|e| e.get()).collect();
    assert_eq!(got, first);
    for entry in &line[20..] {
        assert_eq!(entry_status(&pool, *entry).await, "waiting");
    }
    assert_invariants(&pool).await;
    // The event is cancelled: its offers with its orders, and the places
    // still in line are closed (nothing will come back to offer).
    sale::cancel_event(&pool, fixture.organizer_id.into(), fixture.event_id.into())
        .await
        .unwrap();
    for entry in &line[20..] {
        assert_eq!(entry_status(&pool, *entry).await, "closed");
    }
    let live_offers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM waitlist_entries w JOIN orders o ON o.id = w.order_id
         WHERE o.status <> 'cancelled'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(live_offers, 0);
    assert_eq!(remaining(&pool, tt).await, 20);
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn crosswise_cancels_whose_offers_meet_each_other_both_go_through(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    // Xia holds the one ticket of A and waits for B; Wes holds B and waits
    // for A. Both cancel at once: each cancel frees its buyer's event
    // holding and then offers its ticket to the other, whose event holding
    // the other cancel holds. Postgres aborts one of a deadlock; the cancel
    // runs again, and both go through.
    let pool = pool(connect, 20).await;
    let key = ConfirmKey::random();
    let sales = engine(&pool, &key);
    let at = now();
    for round in 0..5 {
        let fixture =
            published_event(&pool, &[TicketSpec::new(1, 1, 1), TicketSpec::new(1, 1, 1)]).await;
        let (a, b) = (fixture.ticket_type_ids[0], fixture.ticket_type_ids[1]);
        let (xia, wes) = (
            format!("xia{round}@example.org"),
            format!("wes{round}@example.org"),
        );
        let xia_order = sales
            .purchase(at, &purchase_request(a, 1, &xia))
            .await
            .unwrap();
        let wes_order = sales
            .purchase(at, &purchase_request(b, 1, &wes))
            .await
            .unwrap();
        let line_for = |tt: Uuid| common::Fixture {
            ticket_type_ids: vec![tt],
            ..fixture.clone()
        };
        join_line(&pool, &key, &line_for(b), &xia, at).await;
        join_line(&pool, &key, &line_for(a), &wes, at).await;
        let (first, second) = tokio::join!(
            sale::cancel(&pool, at, xia_order.order().id, xia_order.cancel_secret()),
            sale::cancel(&pool, at, wes_order.order().id, wes_order.cancel_secret()),
        );
        assert!(
            first.is_ok() && second.is_ok(),
            "round {round}: {first:?} {second:?}"
        );
        assert_eq!(offered(&pool, a).await.len(), 1, "round {round}");
        assert_eq!(offered(&pool, b).await.len(), 1, "round {round}");
        assert_eq!(
            (remaining(&pool, a).await, remaining(&pool, b).await),
            (0, 0)
        );
    }
    assert_invariants(&pool).await;
}

#[sqlx::test]
async fn one_address_joins_at_most_five_lists_an_hour_so_the_lists_cannot_flood_a_mailbox(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = pool(connect, 5).await;
    let key = ConfirmKey::random();
    let sales = engine(&pool, &key);
    let t0 = now();
    let mut sold_out = Vec::new();
    for i in 0..6 {
        let fixture = published_event(&pool, &[TicketSpec::new(1, 1, 1)]).await;
        let (sold, _) = burst(&sales, fixture.ticket_type_id(), t0, &format!("fan{i}-"), 1).await;
        assert_eq!(sold.len(), 1);
        sold_out.push(fixture);
    }
    let joins_of = |email: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM outbox WHERE kind = 'waitlist.joined' AND payload->>'email' = $1",
            )
            .bind(email)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    for (i, fixture) in sold_out[..5].iter().enumerate() {
        let at = t0 + Span::minutes(i as i64);
        let joined = try_join(&pool, &key, fixture, "victim@example.org", 1, at).await;
        assert!(matches!(joined, Ok(Joined::New(_))), "{joined:?}");
    }
    // The sixth list, ten minutes after the first join, in another spelling
    // of the address: refused with the real wait, and nothing written.
    let refused = try_join(
        &pool,
        &key,
        &sold_out[5],
        "Victim@Example.org",
        1,
        t0 + Span::minutes(10),
    )
    .await;
    match refused {
        Err(AppError::TooManyRequests { retry_after_secs }) => {
            assert_eq!(retry_after_secs, 50 * 60);
        }
        other => panic!("expected 429, got {other:?}"),
    }
    assert_eq!(joins_of("victim@example.org").await, 5);
    let places: i64 =
        sqlx::query_scalar("SELECT count(*) FROM waitlist_entries WHERE ticket_type_id = $1")
            .bind(sold_out[5].ticket_type_id())
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(places, 0);
    // Another address is not held up.
    let other = try_join(&pool, &key, &sold_out[5], "other@example.org", 1, t0).await;
    assert!(matches!(other, Ok(Joined::New(_))), "{other:?}");
    // An hour after its first join, the address may join one more list.
    let later = try_join(
        &pool,
        &key,
        &sold_out[5],
        "victim@example.org",
        1,
        t0 + Span::hours(1) + Span::seconds(1),
    )
    .await;
    assert!(matches!(later, Ok(Joined::New(_))), "{later:?}");
    assert_eq!(joins_of("victim@example.org").await, 6);
}

//! The shuffle anyone can recompute, arrivals after it, and positions.

use super::*;

#[sqlx::test]
async fn a_thousand_joiners_are_shuffled_verifiably_and_later_ones_queue_by_arrival(pool: PgPool) {
    let opens = now() + Duration::minutes(10);
    let fixture = event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[TicketSpec::new(10, 2, 2)],
    )
    .await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(60))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);

    // Before the opening: the commitment only.
    let room = waiting_room::load(&pool, event_id).await.unwrap().unwrap();
    assert_eq!(room.revealed_seed_hex(), None);
    let commitment = room.commitment_hex();
    assert!(
        waiting_room::published_prequeue(&pool, event_id)
            .await
            .unwrap()
            .is_none()
    );

    let before = opens - Duration::minutes(5);
    let mut joined = Vec::new();
    for _ in 0..1000 {
        let entry = waiting_room::join(
            &pool,
            &rooms,
            event_id,
            None,
            Some(&common::proof(&rooms, event_id, before)),
            None,
            before,
        )
        .await
        .unwrap();
        assert!(entry.new);
        joined.push(entry.entry.get());
    }
    // The same browser again keeps its place.
    let again = waiting_room::join(
        &pool,
        &rooms,
        event_id,
        Some(
            &rooms
                .key()
                .entry_token(event_id, QueueEntryId::from(joined[0])),
        ),
        None,
        None,
        before,
    )
    .await
    .unwrap();
    assert!(!again.new);
    assert_eq!(again.entry.get(), joined[0]);

    // The opening: the first shuffler orders the pre-queue, the next finds it done.
    assert!(waiting_room::shuffle(&pool, event_id).await.unwrap());
    assert!(!waiting_room::shuffle(&pool, event_id).await.unwrap());

    // Later arrivals, after the opening.
    let after = opens + Duration::seconds(1);
    let mut later = Vec::new();
    for _ in 0..5 {
        later.push(
            waiting_room::join(
                &pool,
                &rooms,
                event_id,
                None,
                Some(&common::proof(&rooms, event_id, after)),
                None,
                after,
            )
            .await
            .unwrap()
            .entry
            .get(),
        );
    }

    let order = queue_order(&pool, event_id.get()).await;
    assert_eq!(order.len(), 1005);
    let (prequeue, tail) = order.split_at(1000);
    assert_eq!(
        tail,
        later.as_slice(),
        "later arrivals queue in arrival order"
    );
    let mut as_set = prequeue.to_vec();
    as_set.sort();
    let mut joiners = joined.clone();
    joiners.sort();
    assert_eq!(
        as_set, joiners,
        "the pre-queue's order is a permutation of its joiners"
    );

    let join_rank: Vec<usize> = (0..joined.len()).collect();
    let shuffled_rank: Vec<usize> = joined
        .iter()
        .map(|id| prequeue.iter().position(|p| p == id).unwrap())
        .collect();
    let rho = spearman(&join_rank, &shuffled_rank);
    assert!(
        rho.abs() < 0.1,
        "rank correlation with the join order: {rho}"
    );

    // What is published is enough to recompute the order.
    let (room, published) = waiting_room::published_prequeue(&pool, event_id)
        .await
        .unwrap()
        .unwrap();
    let seed = room.revealed_seed_hex().unwrap();
    assert_eq!(
        hex::encode(Sha256::digest(hex::decode(&seed).unwrap())),
        commitment,
        "the revealed seed matches the commitment shown before"
    );
    assert_eq!(
        published, joiners,
        "the published list is the pre-queue, by id"
    );
    assert_eq!(recompute(&seed, &published), prequeue);
}

#[sqlx::test]
async fn a_position_from_ranks_equals_a_count_of_those_ahead(pool: PgPool) {
    let opens = now() + Duration::minutes(10);
    let fixture = event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[TicketSpec::new(10, 2, 2)],
    )
    .await;
    let event_id = EventId::from(fixture.event_id);
    waiting_room::save(&pool, event_id, &settings(600))
        .await
        .unwrap();
    let rooms = common::test_rooms(RoomKey::random(), 10_000);
    let join = |at: OffsetDateTime| {
        let (pool, rooms) = (pool.clone(), rooms.clone());
        async move {
            let proof = common::proof(&rooms, event_id, at);
            waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), None, at)
                .await
                .unwrap()
                .entry
        }
    };
    let mut all = Vec::new();
    for _ in 0..30 {
        all.push(join(opens - Duration::minutes(5)).await);
    }
    let check = |all: Vec<QueueEntryId>, what: &'static str| {
        let pool = pool.clone();
        async move {
            let mut waiting = 0;
            for entry in all {
                match waiting_room::standing(&pool, event_id, entry)
                    .await
                    .unwrap()
                {
                    waiting_room::Standing::Waiting { ahead, .. } => {
                        waiting += 1;
                        assert_eq!(
                            ahead,
                            counted_ahead(&pool, event_id.get(), entry.get()).await,
                            "{what}: entry {entry}"
                        );
                    }
                    waiting_room::Standing::Admitted { .. } => {}
                }
            }
            waiting
        }
    };
    // The opening: shuffled, ranked, admitted at 600 a minute (10 a second).
    let mut at = opens + Duration::seconds(1);
    waiting_room::tick(&pool, at).await.unwrap();
    assert_eq!(admitted(&pool, event_id).await, 10);
    assert_eq!(check(all.clone(), "pre-queue, some admitted").await, 20);
    // Arrivals not ranked yet, then ranked; admission goes on among them.
    for round in 0..4 {
        for _ in 0..7 {
            all.push(join(at).await);
        }
        check(all.clone(), "arrivals before the tick ranks them").await;
        at += Duration::seconds(1);
        waiting_room::tick(&pool, at).await.unwrap();
        assert_eq!(admitted(&pool, event_id).await, 20 + round * 10);
        check(all.clone(), "after the tick").await;
    }
    // Paused: arrivals are still ranked, nobody is admitted.
    let mut paused = settings(600);
    paused.paused = true;
    waiting_room::save(&pool, event_id, &paused).await.unwrap();
    for _ in 0..5 {
        all.push(join(at).await);
    }
    at += Duration::seconds(1);
    waiting_room::tick(&pool, at).await.unwrap();
    assert_eq!(admitted(&pool, event_id).await, 50);
    let unranked: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_entries WHERE rank IS NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(unranked, 0);
    assert_eq!(check(all.clone(), "paused").await, 63 - 50);
    // The room row's counters agree with the table.
    let (ranked, upto): (i64, i64) =
        sqlx::query_as("SELECT ranked, admitted_upto FROM waiting_rooms WHERE event_id = $1")
            .bind(event_id.get())
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((ranked, upto), (63, 50));
}

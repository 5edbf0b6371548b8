//! The sales chart.

use super::*;

struct Point {
    at: OffsetDateTime,
    sold: i64,
    cumulative: i64,
}

fn chart_points(body: &str) -> Vec<Point> {
    let svg = slice(body, "<svg", "</svg>");
    let at = attrs(svg, "data-at");
    let sold = attrs(svg, "data-sold");
    let cumulative = attrs(svg, "data-cumulative");
    assert_eq!(svg.matches("<circle").count(), at.len());
    at.iter()
        .zip(sold)
        .zip(cumulative)
        .map(|((at, sold), cumulative)| Point {
            at: OffsetDateTime::parse(at, &Rfc3339).unwrap(),
            sold: sold.parse().unwrap(),
            cumulative: cumulative.parse().unwrap(),
        })
        .collect()
}

#[sqlx::test]
async fn chart_has_one_point_per_hour_and_ends_at_the_tickets_sold(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Chart",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    let day = datetime!(2026-03-10 00:00 UTC);
    for (quantity, at) in [
        (2, day + Span::minutes(10 * 60 + 5)),
        (3, day + Span::minutes(10 * 60 + 40)),
        (1, day + Span::minutes(12 * 60 + 10)),
        (4, day + Span::minutes(33 * 60 + 59)), // the next day, 09:59
    ] {
        let id = buy(&pool, tts[0], quantity, &format!("q{quantity}@example.org")).await;
        set_created_at(&pool, id, at).await;
    }
    // A cancelled order counts nowhere.
    let cancelled = buy_and_cancel(&pool, tts[0], 5, "gone@example.org").await;
    set_created_at(&pool, cancelled, day + Span::hours(11)).await;

    let body = page(&org, &format!("/organizer/events/{event}")).await;
    let svg = slice(&body, "<svg", "</svg>");
    assert!(svg.contains("role=\"img\""), "{svg}");
    assert!(
        svg.contains("aria-label=\"Tickets sold over time: 10 in total"),
        "{svg}"
    );
    assert!(svg.contains("<title>Tickets sold over time"), "{svg}");
    assert!(svg.contains("data-bucket=\"hour\""), "{svg}");
    assert!(svg.contains("data-total=\"10\""), "{svg}");

    // 23 h 54 min of sales: hourly buckets 10:00 .. 09:00 the next day.
    let points = chart_points(&body);
    assert_eq!(points.len(), 24);
    for (i, point) in points.iter().enumerate() {
        assert_eq!(point.at, day + Span::hours(10 + i as i64));
    }
    let sold: Vec<i64> = points.iter().map(|p| p.sold).collect();
    let mut expected = vec![0; 24];
    expected[0] = 5; // 10:05 and 10:40
    expected[2] = 1; // 12:10
    expected[23] = 4; // 09:59 the next day
    assert_eq!(sold, expected);
    let mut running = 0;
    for point in &points {
        running += point.sold;
        assert_eq!(point.cumulative, running);
    }
    assert_eq!(
        points.last().unwrap().cumulative,
        common::sold(&pool, tts[0]).await
    );
    let polyline = attrs(svg, "points");
    assert_eq!(polyline.len(), 1);
    // The line rises from zero at the first bucket, then one vertex per bucket.
    let vertices: Vec<(f64, f64)> = polyline[0]
        .split(' ')
        .map(|v| {
            let (x, y) = v.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    assert_eq!(vertices.len(), 25);
    assert_eq!(
        vertices[0].0, vertices[1].0,
        "the zero point sits on the first bucket"
    );
    assert!(
        vertices.iter().all(|v| v.1 <= vertices[0].1),
        "the zero point is the lowest: {vertices:?}"
    );
    // Axis labels: the first and last bucket, and the ticket counts.
    assert!(svg.contains(">10 Mar 10:00</text>"), "{svg}");
    assert!(svg.contains(">11 Mar 09:00</text>"), "{svg}");
    assert!(
        svg.contains(">10</text>") && svg.contains(">0</text>"),
        "{svg}"
    );
}

#[sqlx::test]
async fn chart_buckets_follow_the_span_of_the_sales(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let start = datetime!(2026-03-10 10:00:30 UTC);
    // (offsets from the first sale, expected bucket, expected points)
    let cases: [(&[Span], &str, usize); 3] = [
        (
            &[Span::ZERO, Span::minutes(3), Span::seconds(9 * 60 + 20)],
            "minute",
            10,
        ),
        (&[Span::ZERO, Span::hours(30)], "hour", 31),
        (&[Span::ZERO, Span::days(20), Span::days(40)], "day", 41),
    ];
    for (n, (offsets, bucket, count)) in cases.iter().enumerate() {
        let (event, tts) = create_event(
            &pool,
            &org,
            &format!("Span {n}"),
            &[("Standing", "1", "EUR", 100, 10)],
        )
        .await;
        for (i, offset) in offsets.iter().enumerate() {
            let id = buy(&pool, tts[0], 1, &format!("b{i}@example.org")).await;
            set_created_at(&pool, id, start + *offset).await;
        }
        let body = page(&org, &format!("/organizer/events/{event}")).await;
        assert!(
            body.contains(&format!("data-bucket=\"{bucket}\"")),
            "case {n}"
        );
        let points = chart_points(&body);
        assert_eq!(points.len(), *count, "case {n}");
        assert!(points.len() <= 60);
        assert_eq!(points.last().unwrap().cumulative, offsets.len() as i64);
    }
}

#[sqlx::test]
async fn chart_shows_an_empty_state_before_the_first_sale(pool: PgPool) {
    let (_app, org) = setup(&pool).await;
    let (event, tts) = create_event(
        &pool,
        &org,
        "Quiet",
        &[("Standing", "25.00", "EUR", 100, 10)],
    )
    .await;
    let body = page(&org, &format!("/organizer/events/{event}")).await;
    assert!(body.contains("No tickets sold yet"), "{body}");
    assert!(!body.contains("<svg"), "{body}");
    assert!(body.contains("No orders yet."), "{body}");

    // A cancelled order is not a sale.
    let order = buy_and_cancel(&pool, tts[0], 1, "ada@example.org").await;
    let body = page(&org, &format!("/organizer/events/{event}")).await;
    assert!(body.contains("No tickets sold yet"), "{body}");
    assert_eq!(order_ids(&body), [order]);
}

//! Tickets sold over time: the dashboard's chart, and the organizer API's
//! sales per minute, bucketed alike (`date_bin` from one origin).

use sqlx::PgPool;
use time::{Duration, OffsetDateTime};

use crate::{
    domain::{Bucket, EventId, OrganizerId, SalesChart, SalesPoint, SalesRange},
    error::AppError,
};

/// Tickets sold in one minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinuteSales {
    pub at: OffsetDateTime,
    pub tickets: i64,
}

/// Tickets of confirmed orders per minute over `range`, every minute of it
/// (none sold: 0), bucketed as the dashboard's chart is (`date_bin` on the
/// order's creation from the same origin).
pub async fn sales_per_minute(
    db: &PgPool,
    organizer_id: OrganizerId,
    event_id: EventId,
    range: SalesRange,
) -> Result<Vec<MinuteSales>, AppError> {
    let minute = crate::db::pg_interval(Duration::MINUTE.unsigned_abs());
    Ok(sqlx::query_as!(
        MinuteSales,
        r#"WITH sold AS (
               SELECT date_bin($5::interval, o.created_at, $6::timestamptz) AS bucket,
                      SUM(o.quantity)::int8 AS tickets
               FROM orders o
               JOIN ticket_types t ON t.id = o.ticket_type_id
               JOIN events e ON e.id = t.event_id
               WHERE t.event_id = $1 AND e.organizer_id = $2 AND o.status = 'confirmed'
                 AND o.created_at >= $3 AND o.created_at < $4
               GROUP BY 1
           )
           SELECT g.bucket AS "at!", COALESCE(s.tickets, 0)::int8 AS "tickets!"
           FROM generate_series($3::timestamptz, $4::timestamptz - interval '1 microsecond',
                                $5::interval) AS g (bucket)
           LEFT JOIN sold s ON s.bucket = g.bucket
           ORDER BY g.bucket"#,
        event_id.get(),
        organizer_id.get(),
        range.from,
        range.to,
        minute,
        BUCKET_ORIGIN,
    )
    .fetch_all(db)
    .await?)
}

/// A fixed origin for `date_bin`, a Monday at midnight UTC: minute, hour and
/// day buckets start on the clock's round numbers, weeks on Mondays.
const BUCKET_ORIGIN: OffsetDateTime = time::macros::datetime!(2001-01-01 00:00 UTC);

pub(super) async fn sales_chart(
    tx: &mut sqlx::PgConnection,
    organizer_id: OrganizerId,
    event_id: EventId,
) -> Result<Option<SalesChart>, AppError> {
    let span = sqlx::query!(
        r#"SELECT min(o.created_at) AS first, max(o.created_at) AS last
           FROM orders o
           JOIN ticket_types t ON t.id = o.ticket_type_id
           JOIN events e ON e.id = t.event_id
           WHERE t.event_id = $1 AND e.organizer_id = $2 AND o.status = 'confirmed'"#,
        event_id.get(),
        organizer_id.get(),
    )
    .fetch_one(&mut *tx)
    .await?;
    let (Some(first), Some(last)) = (span.first, span.last) else {
        return Ok(None);
    };
    let bucket = Bucket::for_span(last - first);
    // Bucket in SQL; generate_series fills the buckets without sales so that
    // every point is one bucket apart. The interval is fixed microseconds, so
    // the series steps agree with date_bin whatever the session time zone.
    let rows = sqlx::query!(
        r#"WITH sold AS (
               SELECT date_bin($3::interval, o.created_at, $4::timestamptz) AS bucket,
                      SUM(o.quantity)::int8 AS tickets
               FROM orders o
               JOIN ticket_types t ON t.id = o.ticket_type_id
               JOIN events e ON e.id = t.event_id
               WHERE t.event_id = $1 AND e.organizer_id = $2 AND o.status = 'confirmed'
               GROUP BY 1
           )
           SELECT g.bucket AS "at!",
                  COALESCE(s.tickets, 0)::int8 AS "sold!",
                  (SUM(COALESCE(s.tickets, 0)) OVER (ORDER BY g.bucket))::int8 AS "cumulative!"
           FROM (SELECT min(bucket) AS lo, max(bucket) AS hi FROM sold) AS span
           CROSS JOIN LATERAL generate_series(span.lo, span.hi, $3::interval) AS g (bucket)
           LEFT JOIN sold s ON s.bucket = g.bucket
           ORDER BY g.bucket"#,
        event_id.get(),
        organizer_id.get(),
        crate::db::pg_interval(bucket.width.unsigned_abs()),
        BUCKET_ORIGIN,
    )
    .fetch_all(&mut *tx)
    .await?;
    let points = rows
        .into_iter()
        .map(|row| SalesPoint {
            at: row.at,
            sold: row.sold,
            cumulative: row.cumulative,
        })
        .collect();
    Ok(Some(SalesChart { bucket, points }))
}

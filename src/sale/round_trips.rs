//! The sale path's Postgres round trips, counted.

/// Count one Postgres round trip of the sale path in `/metrics`
/// (`stampede_sale_postgres_total{kind}`): `batch` and `single` are purchase
/// transactions (they may write orders); the others (`check`, `replay`, `sold_out_check`, `sold_out_keys`,
/// `gate_rebuild`) are reads.
/// Benchmarks divide the purchase transactions by the tickets sold.
pub(super) fn postgres_round(kind: &'static str) {
    metrics::counter!("stampede_sale_postgres_total", "kind" => kind).increment(1);
}

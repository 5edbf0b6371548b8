-- A sale never runs past its event's start: a close after the start (set
-- before the forms refused it, or by hand) closes at the start. The Rust
-- twin is `domain::SaleWindow::closes`; tests/it/sale_window.rs holds the
-- two together.
CREATE OR REPLACE FUNCTION sale_open(status text, opens_at timestamptz, closes_at timestamptz,
                                     starts_at timestamptz, at timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT status = 'published' AND opens_at <= at
       AND LEAST(coalesce(closes_at, starts_at), starts_at) > at
$$;

-- "Is the sale open": the SQL twin of SaleWindow::state in
-- src/domain/sale_window.rs (tests/sale_window.rs checks that they agree).
-- A plain SQL expression, IMMUTABLE, so the planner inlines it where it is
-- called (the sale transaction's conditional UPDATE).
CREATE FUNCTION sale_open(status text, opens_at timestamptz, closes_at timestamptz, at timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT status = 'published' AND opens_at <= at AND (closes_at IS NULL OR closes_at > at)
$$;

-- Holds for a mailbox not yet proven (no order of its buyer confirmed from
-- a mailed link yet) count against the client address that made them, per
-- event, while they are held: the address is kept on the order.
ALTER TABLE orders ADD COLUMN held_by_address text COLLATE "C";

-- The unconfirmed holds one address has, counted under its advisory lock.
CREATE INDEX orders_held_by_address ON orders (held_by_address)
    WHERE status = 'held' AND held_by_address IS NOT NULL;

-- Whether a buyer's mailbox is proven: a held order of theirs confirmed.
CREATE INDEX orders_proven_buyers ON orders (buyer_key) WHERE confirmed_at IS NOT NULL;

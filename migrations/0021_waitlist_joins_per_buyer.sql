-- The waiting list's per-address limit counts an address's recent joins
-- (each sends a mail) across every list: by buyer, newest last.
CREATE INDEX waitlist_joins_per_buyer ON waitlist_entries (buyer_key, created_at);

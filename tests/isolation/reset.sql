-- The teardown of every permutation (tests/isolation.rs adds it to each
-- spec): back to the empty template, so fixtures.sql loads again.
TRUNCATE organizers, events, ticket_types, orders, tickets, buyer_holdings,
         event_buyer_holdings, outbox CASCADE;
ALTER SEQUENCE order_ids RESTART;
ALTER SEQUENCE waitlist_position RESTART;

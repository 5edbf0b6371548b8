-- Issue 34, the listing flood: an organizer's address is confirmed before
-- they can publish, so throwaway sign-ups cannot fill the public listing.
--
-- Accounts that exist already, and those the `stampede organizer add`
-- command (an operator) or SQL creates, count as confirmed (the default);
-- the web sign-up inserts NULL and asks for the mail below. The link is
-- derived from the confirmation key and the organizer's id, so nothing
-- secret is stored.
ALTER TABLE organizers ADD COLUMN email_confirmed_at timestamptz DEFAULT now();

ALTER TABLE mail_requests DROP CONSTRAINT mail_requests_kind_known,
    ADD CONSTRAINT mail_requests_kind_known
        CHECK (kind IN ('lookup', 'resend', 'organizer_confirm'));

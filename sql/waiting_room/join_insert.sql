INSERT INTO queue_entries (id, event_id, joined_at, client_hash, proof_salt)
SELECT u.id, $1, u.joined_at, u.client_hash, u.proof_salt
FROM unnest($2::uuid[], $3::timestamptz[], $4::bytea[], $5::bytea[]) WITH ORDINALITY
     AS u(id, joined_at, client_hash, proof_salt, n)
ORDER BY u.n
ON CONFLICT (event_id, proof_salt) WHERE proof_salt IS NOT NULL DO NOTHING
RETURNING id

//! The gate's Lua scripts, each atomic in Redis and touching the keys of
//! one ticket type (one hash slot). What they keep is described in the
//! parent module.

/// The purchase's check and decrement. KEYS: the stock hash, the admission
/// record, the in-flight set. ARGV: the buyer field, the quantity, the
/// record's TTL (seconds), the time (Unix ms). An admission bumps `seq` and
/// joins the in-flight set until it is settled or given back (see
/// "Rebuilds"). Answers `{outcome, number, buyer's count, generation}`.
/// The hash is read with one `HMGET` and written with one `HSET`: each
/// `redis.call` costs, and a refusal (most calls in a burst) then makes
/// two instead of six (5.1 against 6.6 µs per call in Redis).
pub(super) const ADMIT: &str = r"
local h = redis.call('HMGET', KEYS[1], 'gen', ARGV[1], 'per_order', 'limit', 'left', 'seq')
local gen = h[1]
if not gen then return {'rebuild', 0, 0, ''} end
local held = tonumber(h[2] or '0')
if redis.call('EXISTS', KEYS[2]) == 1 then return {'replay', 0, held, gen} end
local qty = tonumber(ARGV[2])
local per_order = tonumber(h[3] or '0')
if qty > per_order then return {'order_limit', per_order, held, gen} end
local limit = tonumber(h[4] or '0')
if held + qty > limit then return {'limit', limit, held, gen} end
local left = tonumber(h[5] or '0')
if left < qty then return {'sold_out', left, held, gen} end
redis.call('HSET', KEYS[1], 'left', left - qty, ARGV[1], held + qty, 'seq', tonumber(h[6] or '0') + 1)
redis.call('SET', KEYS[2], gen .. ':' .. qty .. ':' .. ARGV[1], 'EX', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], KEYS[2])
redis.call('EXPIRE', KEYS[3], ARGV[3])
return {'admitted', left - qty, held + qty, gen}
";

/// Read-only, for a ticket type this instance knows sold out: could the
/// request be the retry of a committed purchase? KEYS: the stock hash, the
/// admission record. ARGV: the buyer field. Answers 1 (its key was admitted,
/// or the buyer holds tickets, or the hash is missing: ask Postgres) or 0.
pub(super) const MAY_REPLAY: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return 1 end
if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
if tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') > 0 then return 1 end
return 0
";

/// An admitted purchase that Postgres did not sell. KEYS: the stock hash,
/// the admission record, the in-flight set. ARGV: the record's value, its
/// generation, the quantity, the buyer field. Answers 0: nothing to give
/// back (given back already, or the record is gone); 1: the record dropped,
/// the counts not given back (a rebuild since, see the generation rule);
/// 2: given back. Either way the admission is no longer in flight.
pub(super) const GIVE_BACK: &str = r"
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[3], KEYS[2])
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[2] then return 1 end
local qty = tonumber(ARGV[3])
redis.call('HINCRBY', KEYS[1], 'left', qty)
if redis.call('HINCRBY', KEYS[1], ARGV[4], -qty) <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[4])
end
return 2
";

/// The hash from a Postgres snapshot. KEYS: the stock hash, the in-flight
/// set. ARGV: the generation, left, the limit per buyer, the limit per
/// order, the TTL (seconds), the mode, the `seq` read before the snapshot,
/// the in-flight cutoff (Unix ms), then (buyer field, count) pairs. Modes:
/// - `missing`: only if no hash is there (another instance may have just
///   built it and admitted under it: a second rebuild from a snapshot taken
///   before those admissions commit would forget them and admit too many);
/// - `quiet`: only if no purchase was admitted since `seq` was read and
///   none is in flight (entries older than the cutoff are dropped as lost),
///   so the snapshot saw every admission settled;
/// - `always`: whatever is there.
///
/// `seq` goes on counting across rebuilds. Answers 1: written; 0: left as
/// it was (`missing`); 2: busy (`quiet`).
pub(super) const REBUILD: &str = r"
local mode = ARGV[6]
if mode == 'missing' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local seq = redis.call('HGET', KEYS[1], 'seq') or '0'
if mode == 'quiet' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[8])
  if seq ~= ARGV[7] or redis.call('ZCARD', KEYS[2]) > 0 then return 2 end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'gen', ARGV[1], 'left', ARGV[2], 'limit', ARGV[3], 'per_order', ARGV[4], 'seq', tonumber(seq) + 1)
for i = 9, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
";

package fleet

// Script is the Lua script of one sync, run by EVALSHA (loaded once with
// SCRIPT LOAD, loaded again on NOSCRIPT).
//
// KEYS are the window's slot keys, newest first (KEYS[1] is the current
// slot), then the process's mark key (see [Engine]). ARGV[1] and ARGV[2]
// are the process's cumulative local counts (never deltas), ARGV[3] the
// TTL in milliseconds of every key written, ARGV[4] the process's token,
// ARGV[5] and ARGV[6] "1" to drop (mark as pushed without adding) what is
// new of the first and second count, and ARGV[7] and ARGV[8] the counts
// the process knows it has pushed.
//
// The script adds to the current slot (fields "a" and "b" of a hash, and
// the process's own share of them in "<token>:a" and "<token>:b") only
// what the mark key says was not pushed yet, then records the cumulative
// counts in the mark key. A sync whose reply was lost after the server
// ran it (a reset, a client timeout) is thus never counted twice: the
// next sync, sending the same or larger cumulative counts, adds only the
// difference. When the mark key is gone (expired, server restarted), the
// counts the process knows it pushed are the floor.
//
// The reply is an array of integers: first 1 if the counts were added (0
// if the current slot held data the script does not own), then, for each
// slot in KEYS order, the other processes' a and b: the slot's totals
// minus this process's own share. A slot that is missing reads as 0, 0,
// and a value that is not a count as HINCRBY writes it, a decimal of at
// most 15 digits without leading zeros (a key of another type, a field
// such as "x", "1e3", "01" or "-1"), reads as -1. Every value is checked
// before anything is written: no count of a slot with such a value is
// changed (the first integer of the reply is 0; only its TTL is renewed).
//
// For a Budget, two more KEYS follow the mark key: the lease hash (each
// live process's hold under its token, their sum in "total") and the
// sorted set of the holds' expiries; and ARGV[9] to ARGV[14] are the
// fleet's reserve and ratio, the process's clock and its hold's expiry in
// Unix ms, the retries it asked for since its last sync, and what its
// current lease can still grant. The script purges expired holds, hands
// the process the lease min(⌊free⌋, max(demand, ⌊headroom / live
// processes⌋)), where headroom is reserve + ratio × the window's first
// attempts − its retries and free is headroom − the other processes'
// holds (0 when the counts were not added); when that is 0 and the
// process held nothing, 1 (so that single retries go round a quiet fleet
// larger than its headroom). It records the hold max(lease, what the
// current lease can still grant), and appends the lease to the reply (-1
// for lease keys that are not its data). When the process's hold already
// expires later than this call's (a later sync of the process ran first:
// this call was given up on and ran late), the hold is never lowered and
// its expiry is kept. A lease and a hold are at most
// 10⁹, so that they stay counts as HINCRBY writes them.
//
// Every key the script writes gets the TTL (the lease keys, the TTL plus
// the hold's remaining life), so nothing outlives two windows; it never
// writes a key of another type.
const Script = `
local n, lk, lz = #KEYS - 1, nil, nil
if ARGV[9] then n, lk, lz = #KEYS - 3, KEYS[#KEYS - 1], KEYS[#KEYS] end
local cur, mk = KEYS[1], KEYS[n + 1]
local la, lb, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local fa, fb = ARGV[4] .. ':a', ARGV[4] .. ':b'
local function count(v)
  if not v then return 0 end
  if type(v) ~= 'string' or #v > 15 or not (v == '0' or v:match('^[1-9]%d*$')) then return -1 end
  return tonumber(v)
end
local pa, pb = tonumber(ARGV[7]), tonumber(ARGV[8])
local mt = redis.call('TYPE', mk)['ok']
if mt == 'hash' then
  local m = redis.call('HMGET', mk, 'a', 'b')
  pa = math.max(pa, count(m[1]))
  pb = math.max(pb, count(m[2]))
end
local da, db = math.max(la - pa, 0), math.max(lb - pb, 0)
if ARGV[5] == '1' then da = 0 end
if ARGV[6] == '1' then db = 0 end
local pushed = 0
local t = redis.call('TYPE', cur)['ok']
if t == 'none' or t == 'hash' then
  local v = redis.call('HMGET', cur, 'a', 'b', fa, fb)
  if count(v[1]) >= 0 and count(v[2]) >= 0 and count(v[3]) >= 0 and count(v[4]) >= 0 then
    if da > 0 then
      redis.call('HINCRBY', cur, 'a', da)
      redis.call('HINCRBY', cur, fa, da)
    end
    if db > 0 then
      redis.call('HINCRBY', cur, 'b', db)
      redis.call('HINCRBY', cur, fb, db)
    end
    pushed = 1
    if (la > pa or lb > pb) and (mt == 'none' or mt == 'hash') then
      redis.call('HSET', mk, 'a', ARGV[1], 'b', ARGV[2])
      redis.call('PEXPIRE', mk, ttl)
    end
  end
  if redis.call('EXISTS', cur) == 1 then redis.call('PEXPIRE', cur, ttl) end
end
local out = {pushed}
local ta, tb = 0, 0
for i = 1, n do
  local k = KEYS[i]
  local a, b = 0, 0
  local kt = redis.call('TYPE', k)['ok']
  if kt == 'hash' then
    local v = redis.call('HMGET', k, 'a', 'b', fa, fb)
    a, b = count(v[1]), count(v[2])
    ta, tb = ta + math.max(a, 0), tb + math.max(b, 0)
    local oa, ob = math.max(count(v[3]), 0), math.max(count(v[4]), 0)
    if a >= 0 then a = math.max(a - oa, 0) end
    if b >= 0 then b = math.max(b - ob, 0) end
  elseif kt ~= 'none' then
    a, b = -1, -1
  end
  out[2*i] = a
  out[2*i+1] = b
end
if lk then
  local lease = -1
  local ht, zt = redis.call('TYPE', lk)['ok'], redis.call('TYPE', lz)['ok']
  if (ht == 'none' or ht == 'hash') and (zt == 'none' or zt == 'zset') then
    local now, exp = tonumber(ARGV[11]), tonumber(ARGV[12])
    local tok = ARGV[4]
    local total = count(redis.call('HGET', lk, 'total'))
    local mine = count(redis.call('HGET', lk, tok))
    if total >= 0 and mine >= 0 then
      for _, g in ipairs(redis.call('ZRANGEBYSCORE', lz, '-inf', '(' .. ARGV[11])) do
        if g ~= tok then total = total - math.max(count(redis.call('HGET', lk, g)), 0) end
        redis.call('HDEL', lk, g)
        redis.call('ZREM', lz, g)
      end
      total = math.max(total - mine, 0)
      lease = 0
      local head = tonumber(ARGV[9]) + tonumber(ARGV[10]) * ta - tb
      local free = math.floor(head - total)
      if pushed == 1 and free > 0 then
        local live = redis.call('ZCARD', lz)
        if not redis.call('ZSCORE', lz, tok) then live = live + 1 end
        local want = math.max(tonumber(ARGV[13]), math.floor(head / live))
        if want == 0 and mine == 0 then want = 1 end
        lease = math.min(free, want, 1e9)
      end
      local hold = math.min(math.max(lease, tonumber(ARGV[14])), 1e9)
      local last = redis.call('ZSCORE', lz, tok)
      if last and tonumber(last) > exp then
        hold = math.max(hold, mine)
      else
        redis.call('ZADD', lz, exp, tok)
      end
      redis.call('HSET', lk, tok, hold, 'total', total + hold)
      local lttl = ttl + math.max(exp - now, 0)
      redis.call('PEXPIRE', lk, lttl)
      redis.call('PEXPIRE', lz, lttl)
    end
  end
  out[2*n+2] = lease
end
return out
`

package fleet

// Script is the Lua script of one sync, run by EVALSHA (loaded once with
// SCRIPT LOAD, loaded again on NOSCRIPT).
//
// KEYS are the window's slot keys, newest first: KEYS[1] is the current
// slot. ARGV[1] and ARGV[2] are the counts to add to the current slot
// (fields "a" and "b" of a hash), ARGV[3] the TTL in milliseconds that
// the current slot gets. The reply is an array of integers: first 1 if the
// counts were added (0 if the current slot held data the script does not
// own), then a and b of each slot in KEYS order; a slot that is missing
// reads as 0, 0, and a value that is not a non-negative integer (a key of
// another type, a field that is not a number) reads as -1.
//
// Every key the script writes gets the TTL, so nothing outlives two
// windows; it never writes a key of another type.
const Script = `
local cur = KEYS[1]
local da, db, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local pushed = 0
local t = redis.call('TYPE', cur)['ok']
if t == 'none' or t == 'hash' then
  local ok = true
  if da > 0 and type(redis.pcall('HINCRBY', cur, 'a', da)) == 'table' then ok = false end
  if ok and db > 0 and type(redis.pcall('HINCRBY', cur, 'b', db)) == 'table' then ok = false end
  if ok then pushed = 1 end
  if redis.call('EXISTS', cur) == 1 then redis.call('PEXPIRE', cur, ttl) end
end
local out = {pushed}
for i, k in ipairs(KEYS) do
  local a, b = 0, 0
  local kt = redis.call('TYPE', k)['ok']
  if kt == 'hash' then
    local v = redis.call('HMGET', k, 'a', 'b')
    if v[1] then a = tonumber(v[1]) or -1 end
    if v[2] then b = tonumber(v[2]) or -1 end
    if a ~= -1 and (a < 0 or a ~= math.floor(a)) then a = -1 end
    if b ~= -1 and (b < 0 or b ~= math.floor(b)) then b = -1 end
  elseif kt ~= 'none' then
    a, b = -1, -1
  end
  out[2*i] = a
  out[2*i+1] = b
end
return out
`

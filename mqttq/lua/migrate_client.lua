--[[
migrate_client.lua: write one client's queue migrated from TBMQ 1.x's PostgreSQL, atomically.

KEYS[1]  {client_id}_messages            ZSET; member = message key name, score = serial
KEYS[2]  {client_id}_last_packet_id      STRING
KEYS[3]  {client_id}_last_serial_number  STRING
KEYS[4]  {client_id}_migrated            STRING; the migration's completion marker
ARGV[1]  what to do when the client already has keys 1..3 (not written by a migration):
         "fail" (write nothing), "skip" (write nothing) or "replace" (delete them first)
ARGV[2]  the marker's value (set last, with no TTL)
ARGV[3]  last packet id to store, "" for none
ARGV[4]  last serial to store, "" for none
ARGV[5]  three decimal numbers per message, in serial order, separated by spaces: serial
         (the score), packet id, absolute expiry in ms since the epoch (SET ... PXAT)
ARGV[6]  the messages' JSON texts in the same order, separated by "\n" (compact JSON with
         its strings escaped holds no raw line feed)
Result   { status, messages written } with status "migrated", "replaced" (old keys were
         deleted first), "already" (the marker exists: nothing written), "conflict"
         (ARGV[1] "fail") or "skipped" (ARGV[1] "skip"): 0 messages written for those three

A message key is KEYS[1] .. "_" .. packet_id: it carries the client's hash tag, so every key
of the script lives in one cluster slot. Messages travel in two arguments, not four each: a
client of 10,000 messages would otherwise cost the client library 40,000 arguments to
encode. The marker makes the script idempotent: running it again for the same client (a
resumed or repeated migration) writes nothing.

Where Redis's time goes (the migration's bottleneck; docs/benchmarks.md, issue 4): one SET
per message is unavoidable (each key has its own expiry), so everything else is kept off the
per-message path. The ZSET members are added newest first: a queue of up to 128 entries is a
listpack, and each insert scans it from the head for its place, so oldest-first insertion
scans the whole list every time, newest-first stops at once (half of ZADD's cost). The
common case, a client Redis does not know yet, costs one EXISTS; the counters and the marker
go in one MSET.
--]]
local zset, last_id_key, serial_key, marker = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local call = redis.call

local status = 'migrated'
if call('EXISTS', marker, zset, last_id_key, serial_key) > 0 then
  if call('EXISTS', marker) == 1 then
    return { 'already', 0 }
  end
  if ARGV[1] == 'fail' then
    return { 'conflict', 0 }
  elseif ARGV[1] == 'skip' then
    return { 'skipped', 0 }
  end
  local members = call('ZRANGE', zset, 0, -1)
  for i = 1, #members do
    call('DEL', members[i])
  end
  call('DEL', zset, last_id_key, serial_key)
  status = 'replaced'
end

local scored = {}  -- (score, member) pairs, oldest first
local written = 0
local numbers = string.gmatch(ARGV[5], '%d+')
local texts, from = ARGV[6], 1
local find, sub = string.find, string.sub
for serial in numbers do
  local packet_id, expires_at = numbers(), numbers()
  local to = find(texts, '\n', from, true) or (#texts + 1)
  local key = zset .. '_' .. packet_id
  call('SET', key, sub(texts, from, to - 1), 'PXAT', expires_at)
  from = to + 1
  scored[2 * written + 1] = serial
  scored[2 * written + 2] = key
  written = written + 1
end
-- ZADD newest first, in chunks: unpack() is bounded by Lua's C stack (8000 values).
local chunk, n = {}, 0
for i = 2 * written - 1, 1, -2 do
  chunk[n + 1] = scored[i]
  chunk[n + 2] = scored[i + 1]
  n = n + 2
  if n == 2000 then
    call('ZADD', zset, unpack(chunk))
    chunk, n = {}, 0
  end
end
if n > 0 then
  call('ZADD', zset, unpack(chunk))
end

local settings = {}
if ARGV[3] ~= '' then
  settings[#settings + 1] = last_id_key
  settings[#settings + 1] = ARGV[3]
end
if ARGV[4] ~= '' then
  settings[#settings + 1] = serial_key
  settings[#settings + 1] = ARGV[4]
end
settings[#settings + 1] = marker
settings[#settings + 1] = ARGV[2]
call('MSET', unpack(settings))
return { status, written }

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
--]]
local zset, last_id_key, serial_key, marker = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

if redis.call('EXISTS', marker) == 1 then
  return { 'already', 0 }
end

local status = 'migrated'
if redis.call('EXISTS', zset, last_id_key, serial_key) > 0 then
  if ARGV[1] == 'fail' then
    return { 'conflict', 0 }
  elseif ARGV[1] == 'skip' then
    return { 'skipped', 0 }
  end
  local members = redis.call('ZRANGE', zset, 0, -1)
  for i = 1, #members do
    redis.call('DEL', members[i])
  end
  redis.call('DEL', zset, last_id_key, serial_key)
  status = 'replaced'
end

local written = 0
local scored = {}
local numbers = string.gmatch(ARGV[5], '%d+')
local texts, from = ARGV[6], 1
for serial in numbers do
  local packet_id, expires_at = numbers(), numbers()
  local to = string.find(texts, '\n', from, true) or (#texts + 1)
  local key = zset .. '_' .. packet_id
  redis.call('SET', key, string.sub(texts, from, to - 1), 'PXAT', expires_at)
  from = to + 1
  scored[#scored + 1] = serial
  scored[#scored + 1] = key
  written = written + 1
  -- ZADD in chunks: unpack() is bounded by Lua's C stack (8000 values).
  if #scored >= 2000 then
    redis.call('ZADD', zset, unpack(scored))
    scored = {}
  end
end
if #scored > 0 then
  redis.call('ZADD', zset, unpack(scored))
end
if ARGV[3] ~= '' then
  redis.call('SET', last_id_key, ARGV[3])
end
if ARGV[4] ~= '' then
  redis.call('SET', serial_key, ARGV[4])
end
redis.call('SET', marker, ARGV[2])
return { status, written }

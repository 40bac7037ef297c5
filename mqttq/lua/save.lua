--[[
save.lua: append a batch of messages to one client's offline queue (TBMQ 2.x layout).

KEYS[1]  {client_id}_messages            ZSET; member = message key name, score = serial
KEYS[2]  {client_id}_last_packet_id      STRING; the last packet id assigned
KEYS[3]  {client_id}_last_serial_number  STRING; the last serial assigned (mqttq's own key)
KEYS[4]  optional: {client_id}_session_node  STRING; the node the client is connected to
ARGV[1]  the queue limit, 1..65535
ARGV[2]  "1": refuse messages beyond the limit (REJECT_NEW); "0": trim the oldest (DROP_OLDEST)
ARGV[3], ARGV[4], ...  one pair per message: TTL in seconds, message JSON with "packetId":0
Result   two integers per message, in order: its serial and its packet id
         (0 and 0 for a message refused by a full queue); with KEYS[4], then its value,
         or "" when the client is connected nowhere. Read in the same script, it tells the
         caller where the client is as of this write: a node attaching the client sets
         the marker before it fetches the queue, so an entry it did not fetch is one
         written after the marker, whose writer hands it to that node.

A message key is KEYS[1] .. "_" .. packet_id: it carries the client's hash tag, so every key
of the script lives in one cluster slot. Packet ids wrap 65535 -> 1 while the serial keeps
growing; an id still held by an entry of the set is skipped. The serial continues from the
largest of the stored serial, the newest score and the last packet id (TBMQ keeps no serial:
it restarts the score from the last packet id when the set is empty; that covers a queue
written by TBMQ, and the serial key keeps mqttq's serial growing across an empty queue).
--]]
local zset, last_id_key, serial_key, node_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local limit = tonumber(ARGV[1])
local reject = ARGV[2] == '1'
local n = (#ARGV - 2) / 2

local counters = redis.call('MGET', last_id_key, serial_key)
local last_id = tonumber(counters[1] or 0) or 0
local serial = tonumber(counters[2] or 0) or 0
local newest = redis.call('ZRANGE', zset, -1, -1, 'WITHSCORES')
if newest[2] then
  serial = math.max(serial, tonumber(newest[2]))
end
serial = math.max(serial, last_id)
local count = redis.call('ZCARD', zset)

-- Messages first..last are written; under DROP_OLDEST the ones before `first` would be
-- trimmed by the later ones at once, so they get their ids but are never written.
local first, last = 1, n
if reject then
  last = math.min(n, math.max(0, limit - count))
else
  if n > limit then
    first = n - limit + 1
  end
  -- Trim before assigning ids, so that enough of them are free.
  local excess = count + (last - first + 1) - limit
  if excess > 0 then
    local oldest = redis.call('ZPOPMIN', zset, excess)
    for i = 1, #oldest, 2 do
      redis.call('DEL', oldest[i])
    end
    count = count - excess
  end
end

-- Only ids of entries stored before this call can be taken: the batch's own ids cannot
-- repeat (count + its size stays within the limit, at most 65535).
local stored = count
local function next_packet_id()
  local id = last_id % 65535 + 1
  if stored > 0 then
    while redis.call('ZSCORE', zset, zset .. '_' .. id) do
      id = id % 65535 + 1
    end
  end
  last_id = id
  serial = serial + 1
  return id
end

local result = {}
local scored = {}
for i = 1, n do
  if i > last then
    result[2 * i - 1] = 0
    result[2 * i] = 0
  else
    local id = next_packet_id()
    result[2 * i - 1] = serial
    result[2 * i] = id
    if i >= first then
      local key = zset .. '_' .. id
      local json = string.gsub(ARGV[2 * i + 2], '"packetId":0([,}])', '"packetId":' .. id .. '%1', 1)
      redis.call('SET', key, json, 'EX', ARGV[2 * i + 1])
      scored[#scored + 1] = serial
      scored[#scored + 1] = key
      if #scored >= 1000 then  -- unpack() has a bounded stack: ZADD in chunks
        redis.call('ZADD', zset, unpack(scored))
        scored = {}
      end
    end
  end
end
-- One ZADD (per 500 entries) and one MSET for the whole batch (one slot: the client's).
if #scored > 0 then
  redis.call('ZADD', zset, unpack(scored))
end
if last > 0 then
  redis.call('MSET', last_id_key, last_id, serial_key, serial)
end
if node_key then
  result[#result + 1] = redis.call('GET', node_key) or ''
end
return result

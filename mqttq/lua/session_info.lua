--[[
session_info.lua: a read-only summary of one session, for `mqttq session ls`.

KEYS[1]  {client_id}_messages        ZSET of message key names
KEYS[2]  {client_id}_last_packet_id  STRING
KEYS[3]  {client_id}_session_node    STRING, set while the client is connected
ARGV     none
Result   pending entries (ZCARD), last packet id (nil if unset), session node (nil if none),
         then for the oldest and for the newest entry: its time in ms since the epoch (nil
         when unreadable), its key's TTL in ms (PTTL: -1 none, -2 missing) and its state,
         "ok" | "missing" (key expired or deleted) | "malformed" (not JSON with a numeric
         time) | "wrongtype" (not a string)

When KEYS[1] is not a ZSET, the result is -1 and its type. Only the two entries' `time`
fields are read, so a large queue costs no more than a small one.
--]]
local function describe(key)
  if not key then
    return false, -2, 'missing'
  end
  local value = redis.pcall('GET', key)
  if type(value) == 'table' then
    return false, redis.call('PTTL', key), 'wrongtype'
  end
  if not value then
    return false, -2, 'missing'
  end
  local ok, message = pcall(cjson.decode, value)
  if ok and type(message) == 'table' and type(message['time']) == 'number' then
    return message['time'], redis.call('PTTL', key), 'ok'
  end
  return false, redis.call('PTTL', key), 'malformed'
end

local function get(key)
  local value = redis.pcall('GET', key)
  return type(value) == 'string' and value
end

local pending = redis.pcall('ZCARD', KEYS[1])
if type(pending) == 'table' then
  return { -1, redis.call('TYPE', KEYS[1])['ok'] }
end
local result = { pending, get(KEYS[2]), get(KEYS[3]) }
if pending > 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1)[1]
  result[4], result[5], result[6] = describe(oldest)
  result[7], result[8], result[9] = describe(newest)
end
return result

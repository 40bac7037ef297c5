--[[
fetch.lua: a client's offline queue in delivery (score) order, on reconnect.

KEYS[1]  {client_id}_messages  ZSET; member = message key name, score = serial
ARGV     none
Result   three entries per message, in score order: serial (integer), message key name,
         and the stored JSON; for a key of another type than STRING (not written by a
         broker) a one-element array holding that type instead of the JSON

A reference whose message key is gone (expired by its TTL, or deleted) is removed from the
set and left out of the result.
--]]
local zset = KEYS[1]
local members = redis.call('ZRANGE', zset, 0, -1, 'WITHSCORES')
local result = {}
for i = 1, #members, 2 do
  local key = members[i]
  local value = redis.pcall('GET', key)
  if type(value) == 'table' then
    value = { redis.call('TYPE', key)['ok'] }
  end
  if value then
    result[#result + 1] = tonumber(members[i + 1])
    result[#result + 1] = key
    result[#result + 1] = value
  else
    redis.call('ZREM', zset, key)
  end
end
return result

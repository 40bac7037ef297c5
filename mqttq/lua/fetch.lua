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
-- One MGET per chunk of keys instead of one GET per entry (unpack() has a bounded stack).
local chunk = 1000
for start = 1, #members, 2 * chunk do
  local stop = math.min(#members, start + 2 * chunk - 1)
  local keys = {}
  for i = start, stop, 2 do
    keys[#keys + 1] = members[i]
  end
  local values = redis.call('MGET', unpack(keys))
  for j = 1, #keys do
    local key, value = keys[j], values[j]
    if not value then
      -- MGET answers nil for a missing key and for one of another type than STRING.
      local kind = redis.call('TYPE', key)['ok']
      if kind ~= 'none' then
        value = { kind }
      end
    end
    if value then
      result[#result + 1] = tonumber(members[start + 2 * j - 1])
      result[#result + 1] = key
      result[#result + 1] = value
    else
      redis.call('ZREM', zset, key)
    end
  end
end
return result

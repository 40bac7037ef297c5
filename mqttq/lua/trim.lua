--[[
trim.lua: keep only the newest entries of a client's queue (`mqttq session trim`).

KEYS[1]  {client_id}_messages  ZSET of message key names
ARGV[1]  how many entries to keep (0 or more)
Result   two integers: entries removed (the oldest, with their message keys), entries left

The counters stay: later messages continue the packet ids and serials.
--]]
local keep = tonumber(ARGV[1])
local excess = redis.call('ZCARD', KEYS[1]) - keep
if excess <= 0 then
  return { 0, keep + excess }
end
local oldest = redis.call('ZPOPMIN', KEYS[1], excess)
for i = 1, #oldest, 2 do
  redis.call('DEL', oldest[i])
end
return { excess, keep }

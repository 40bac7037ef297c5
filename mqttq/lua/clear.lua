--[[
clear.lua: delete a client's whole queue and its counters (clean start, session removed).

KEYS[1]  {client_id}_messages            ZSET of message key names
KEYS[2]  {client_id}_last_packet_id      STRING
KEYS[3]  {client_id}_last_serial_number  STRING
KEYS[4]  optional: {client_id}_session_node  STRING, deleted too (not counted): the session
         it belonged to is over, and a marker left by a node that died would name it
ARGV     none
Result   two integers: message keys deleted, and other keys deleted (set and counters)

The next message saved for the client gets packet id 1 and serial 1.
--]]
if KEYS[4] then
  redis.call('DEL', KEYS[4])
end
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local deleted = 0
for i = 1, #members do
  deleted = deleted + redis.call('DEL', members[i])
end
return { deleted, redis.call('DEL', KEYS[1], KEYS[2], KEYS[3]) }

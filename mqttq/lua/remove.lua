--[[
remove.lua: delete entries of one client's queue (PUBACK, or PUBCOMP, received).

KEYS[1]     {client_id}_messages              ZSET of message key names
KEYS[2...]  {client_id}_messages_<packet_id>  the message keys of the entries to delete
            (one or more: the broker gathers a client's acks of one event-loop iteration)
ARGV        none
Result      how many of them the set held
--]]
local members = {}
for i = 2, #KEYS do
  members[i - 1] = KEYS[i]
end
redis.call('DEL', unpack(members))
return redis.call('ZREM', KEYS[1], unpack(members))

--[[
remove.lua: delete one entry of a client's queue (PUBACK, or PUBCOMP, received).

KEYS[1]  {client_id}_messages              ZSET of message key names
KEYS[2]  {client_id}_messages_<packet_id>  the entry's message key
ARGV     none
Result   1 when the set held the entry, else 0
--]]
redis.call('DEL', KEYS[2])
return redis.call('ZREM', KEYS[1], KEYS[2])

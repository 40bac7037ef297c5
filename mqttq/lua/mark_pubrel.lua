--[[
mark_pubrel.lua: mark an entry as awaiting PUBCOMP (PUBREC received): packetType PUBREL.

KEYS[1]  {client_id}_messages_<packet_id>  the entry's message key
ARGV     none
Result   1 when the value was rewritten, 0 when the key is missing, not a string, not
         readable JSON, or already PUBREL

The value is rewritten with KEEPTTL: the entry keeps its expiry (TBMQ's UPDATE_PACKET_TYPE
re-SETs it without one, so its PUBREL entries never expire). The JSON changes only in its
packetType, byte for byte; JSON where that field cannot be found is decoded and re-encoded.
--]]
local value = redis.pcall('GET', KEYS[1])
if type(value) ~= 'string' then
  return 0
end
-- A quote inside a JSON string is escaped, so `"packetType":` can only be the field's key.
local marked, changed = string.gsub(value, '("packetType"%s*:%s*)"PUBLISH"', '%1"PUBREL"', 1)
if changed == 0 then
  if string.find(value, '"packetType"%s*:%s*"PUBREL"') then
    return 0
  end
  local ok, message = pcall(cjson.decode, value)
  if not ok or type(message) ~= 'table' then
    return 0
  end
  message['packetType'] = 'PUBREL'
  marked = cjson.encode(message)
end
redis.call('SET', KEYS[1], marked, 'KEEPTTL')
return 1

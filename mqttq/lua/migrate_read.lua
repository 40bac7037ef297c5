--[[
migrate_read.lua: what Redis holds for one client, read-only (migration checks and verify).

KEYS[1]  {client_id}_messages            ZSET; member = message key name, score = serial
KEYS[2]  {client_id}_last_packet_id      STRING
KEYS[3]  {client_id}_last_serial_number  STRING
KEYS[4]  {client_id}_migrated            STRING; the migration's completion marker
ARGV[1]  "1": also return the entries; "0": only the summary
Result   marker value (false if none), how many of KEYS[1..3] exist, last packet id (false
         if unset), last serial (false if unset), then with ARGV[1] "1" three values per
         ZSET member in score order: score (integer), member (the message key name), and
         the message key's value (false when the key is gone or is not a string)

Nothing is changed: a reference to an expired message is reported, not removed.
--]]
local function get(key)
  local value = redis.pcall('GET', key)
  if type(value) == 'string' then
    return value
  end
  return false
end

local result = {
  get(KEYS[4]),
  redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]),
  get(KEYS[2]),
  get(KEYS[3]),
}
if ARGV[1] == '1' and redis.call('TYPE', KEYS[1])['ok'] == 'zset' then
  local members = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  for i = 1, #members, 2 do
    result[#result + 1] = tonumber(members[i + 1])
    result[#result + 1] = members[i]
    result[#result + 1] = get(members[i])
  end
end
return result

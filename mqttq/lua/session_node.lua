--[[
session_node.lua: record, or forget, which broker node a client is connected to (what
`mqttq session rm` checks before removing a session). A script rather than a plain SET/DEL
so that it travels in the queue calls' pipeline, in order with them and on their one
connection: a burst of connects never opens a connection each.

KEYS[1]  {client_id}_session_node  STRING, the node's name while the client is connected
ARGV[1]  the node's name to record, or "" to forget it
ARGV[2]  with ARGV[1] = "": forget it only while it names this node (so that a node
         letting go of a client never erases the marker of the node that took it over)
Result   1
--]]
if ARGV[1] == '' then
  if redis.call('GET', KEYS[1]) == ARGV[2] then
    redis.call('DEL', KEYS[1])
  end
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1

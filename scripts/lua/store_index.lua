--[[ store_index: list store namespaces in the index of namespaces, the
step before a put writes their items (store_put.lua).

The index is another Redis Cluster slot than the namespaces' items, so a
put is two scripts, index first: a put cut between the two leaves an
index entry with no items, which readers skip (and store_unindex.lua
drops later), never items that no listing finds. Each entry's time of
last indexing is kept, so that a reader drops only entries no put has
touched for a while.

KEYS[1] the index (zset, every score 0: namespaces in lexical order,
        labels joined by ".")
KEYS[2] when each namespace was last indexed (hash: namespace -> ms)

ARGV[1..] namespaces, labels joined by "."

Returns
  {n}   n namespaces listed that were not before
]]
local rcall = redis.call
--@include clock
local indexKey, seenKey = KEYS[1], KEYS[2]
local added = 0
for i = 1, #ARGV do
  added = added + rcall('ZADD', indexKey, 0, ARGV[i])
  rcall('HSET', seenKey, ARGV[i], nowS)
end
return {added}

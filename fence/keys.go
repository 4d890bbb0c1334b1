package fence

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// Keys builds every Redis key baton uses. A run without a thread is its own
// thread (thread = run id).
//
// The key space is cut into Shards shards. A thread belongs to one shard
// (ShardOf), and every key of the thread carries its shard's hash tag, as
// do the shard's indexes (leases, ready, finished, queued threads, the run
// listing). So each script touches keys of one Redis Cluster slot, and
// the indexes it writes are in that slot too. The sweeper and the listing
// visit every shard.
//
// Builders take IDs that already passed ValidateID; Keys never validates.
type Keys struct {
	// Prefix starts every key. Zero value: "baton".
	Prefix string
}

func (k Keys) prefix() string {
	if k.Prefix == "" {
		return "baton"
	}
	return k.Prefix
}

// Shards is the number of shards of the key space, fixed: it is part of
// the key layout, so every runner and client of one Redis agrees on it
// without configuration. Sixteen spreads the load over up to sixteen
// masters while a sweeper tick costs sixteen script calls, pipelined.
const Shards = 16

// shardTags[i] is shard i's hash tag, chosen so that its Redis Cluster
// slot lies in the i-th sixteenth of the slot range: on a cluster whose
// masters own contiguous, equal slot ranges (what redis-cli --cluster
// create makes), the shards spread evenly over the masters.
var shardTags = func() [Shards]string {
	var tags [Shards]string
	const width = 16384 / Shards
	for i := range tags {
		for n := 0; ; n++ {
			t := "s" + strconv.Itoa(i) + "." + strconv.Itoa(n)
			if int(Slot(t))/width == i {
				tags[i] = t
				break
			}
		}
	}
	return tags
}()

// ShardOf returns the shard of a thread's keys.
func ShardOf(thread string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(thread))
	return int(h.Sum32() % Shards)
}

func (k Keys) tagged(thread string, parts ...string) string {
	return k.prefix() + ":{" + shardTags[ShardOf(thread)] + "}:" + thread + ":" + strings.Join(parts, ":")
}

func (k Keys) index(shard int, name string) string {
	return k.prefix() + ":{" + shardTags[shard] + "}:" + name
}

// Run is the run's hash: status, cancel flag, node list, counters.
func (k Keys) Run(thread, run string) string { return k.tagged(thread, "run", run) }

// Node is one node's hash: state, owner, epoch, claim id, lease, result.
func (k Keys) Node(thread, run, node string) string { return k.tagged(thread, "node", run, node) }

// Packed is a finished run's run hash, node hashes and event stream packed
// into one string (scripts/lua/lib/pack.lua; fence reads it back value for
// value). The bench's memory section stores finished runs there to
// measure what one key per retained run costs; no operation writes it yet.
func (k Keys) Packed(thread, run string) string { return k.tagged(thread, "done", run) }

// Active names the thread's active run (threads with a multitask
// strategy).
func (k Keys) Active(thread string) string { return k.tagged(thread, "active") }

// Queue lists the runs waiting for the thread's active run to end
// (multitask "enqueue", "interrupt", "rollback"), first to start first.
func (k Keys) Queue(thread string) string { return k.tagged(thread, "queue") }

// Events is the run's event stream.
func (k Keys) Events(thread, run string) string { return k.tagged(thread, "events", run) }

// Checkpoints is the thread's hash of checkpoint namespaces, each with the
// last version assigned in it (versions are never reused).
func (k Keys) Checkpoints(thread string) string { return k.tagged(thread, "cp") }

// CheckpointNS are the four keys of one namespace of a thread's
// checkpoints: versions (zset), data (hash), ids (hash) and pending
// writes (hash). ns passed ValidateNS.
func (k Keys) CheckpointNS(thread, ns string) [4]string {
	return [4]string{k.tagged(thread, "cpv", ns), k.tagged(thread, "cpd", ns),
		k.tagged(thread, "cpi", ns), k.tagged(thread, "cpw", ns)}
}

// Locator maps a run id to its thread, written once at submit. It lives in
// the run id's shard: for a run without a thread (its own thread) that is
// the thread's shard, so the submit script writes it; a run of another
// thread has it outside the thread's slot. "/" cannot occur in an ID, so
// no thread's key can take its name.
func (k Keys) Locator(run string) string { return k.index(ShardOf(run), "loc/"+run) }

// The indexes below are per shard: shard is ShardOf(thread) of the
// threads they index.

// Runs indexes the shard's runs by creation time, for listing.
func (k Keys) Runs(shard int) string { return k.index(shard, "runs") }

// Leases indexes RUNNING nodes by lease deadline (ms, Redis time). A trigger
// for the sweeper, never authority.
func (k Keys) Leases(shard int) string { return k.index(shard, "leases") }

// SweptBy is a sweeper's last hand-out of expired leases in a shard (ref ->
// the score it pushed them to), kept a retry interval so that a sweeper
// that heard no reply gets them again (sweep.lua).
func (k Keys) SweptBy(shard int, sweeper string) string { return k.index(shard, "swept/"+sweeper) }

// Ready indexes READY nodes by when they became due (ms, Redis time). A
// trigger for the sweeper, never authority.
func (k Keys) Ready(shard int) string { return k.index(shard, "ready") }

// Waits is a shard's index of parked nodes with a timeout: ref -> ms when
// the wait times out (a trigger for the sweeper, never authority).
func (k Keys) Waits(shard int) string { return k.index(shard, "waits") }

// Finished indexes runs that ended ("thread:run:" -> ms), until the
// sweeper has applied their retention; then, for a run of a thread, the
// bare run id until its locator (another slot) has its time to live.
func (k Keys) Finished(shard int) string { return k.index(shard, "finished") }

// Queued indexes threads that have runs waiting (thread -> ms when last
// looked at): the sweeper starts a waiting run whose thread's active run
// ended but was never followed (its ender crashed). A trigger, never
// authority.
func (k Keys) Queued(shard int) string { return k.index(shard, "queued") }

// Ref names a node in the global indexes: "thread:run:node". Colons cannot
// occur in IDs, so a ref splits back unambiguously.
func Ref(thread, run, node string) string { return thread + ":" + run + ":" + node }

// ParseRef splits a ref built by Ref.
func ParseRef(ref string) (thread, run, node string, ok bool) {
	parts := strings.Split(ref, ":")
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// Workers indexes the runners that advertise themselves (id -> ms when
// the advertisement expires). A listing aid, never authority.
func (k Keys) Workers() string { return k.prefix() + ":workers" }

// Worker is one runner's advertisement (JSON, with a TTL).
func (k Keys) Worker(id string) string { return k.prefix() + ":workers:" + id }

// Unserved marks a node that was reported as served by no live runner, so
// the fleet warns about it once.
func (k Keys) Unserved(ref string) string { return k.prefix() + ":unserved:" + ref }

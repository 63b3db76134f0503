// Package fleet is the store-agnostic sync engine behind retryredis and
// retryvalkey: it makes a retry.Budget or retry.Throttle in each process
// decide as one shared by every process that syncs under the same key
// prefix. A client module only adapts its client to [Store] (load a
// script, call it by SHA).
//
// Each Engine runs one goroutine that, every Interval, pushes the local
// counts added since the last sync into the fleet's current window slot
// and reads back the counts of the window's slots, in one script call.
// The other processes' counts (the totals minus what this process pushed)
// go to the Budget or Throttle through the core's SetFleet (registered with
// internal/fleetseam, not exported), with, for a Budget, the
// lease the script handed this process: its share of the fleet's headroom,
// which no other process can be handed while this one holds it, so that
// the fleet's retries stay within one Budget's bound whatever the number
// of processes (see "The fleet-wide bound and its derivation" below). The request path never waits on the store: it reads only
// what the last sync left.
//
// When a sync fails or does not answer within Timeout, the engine calls
// ClearFleet at once (the process decides locally, exactly as a Budget or
// Throttle that was never shared) and logs the switch once; the first sync
// that succeeds again rejoins the fleet (and logs that once). The engine
// does not rely on the store to honour the context: a store call runs on a
// goroutine of its own, and one that outlasts its sync's deadline is left
// to end by itself, while the syncs after it fail at once without a call,
// so that there is never more than one.
//
// # The fleet-wide bound and its derivation
//
// Notation: P processes share a Budget (Ratio ρ, MinPerSecond m, Window W, reserve R = m·W once for the
// fleet); sync interval I, timeout τ ≤ I; a lease lives L = 2I + τ (300 ms by default).
//
// The mechanism: leases. Each sync's script (one `EVALSHA`, atomic on the server) pushes the process's new
// counts, reads the window back and hands the process a lease: a number of retries taken from the fleet's
// headroom. The server keeps every live process's hold (what its lease may still grant) and their sum:
//
//   - free = R + ρ·A − B − (the other processes' holds), A and B the fleet's first attempts and retries in the
//     window as pushed;
//   - lease = min(⌊free⌋, max(demand, ⌊(R + ρ·A − B) / live processes⌋)), never negative, where demand is the
//     retries the process asked for (granted or refused) in its last interval, or its earlier demand decayed by a
//     tenth per sync if that is more (a caller slower than the syncs would otherwise be leased retries in the
//     intervals after it asked and none in those it asks in); when that comes to 0 and the process held nothing, 1
//     (so that single retries go round a quiet fleet larger than its reserve, each unused one coming back at the
//     holder's next sync): a process that asks gets what it asks for while there is headroom, a quiet one its fair
//     share;
//   - the process's hold becomes max(lease, what its previous lease can still grant until the new one is
//     installed), and expires L plus one slot after the sync (one slot: the clock agreement the slot keys already
//     need), so a process that died or fell back stops holding headroom after about L. A sync that finds a later
//     one of the same process already run (it was given up on and the server ran it late, after the next) never
//     lowers the hold: it would have replaced the newer lease's hold with its own older, smaller one
//     (`TestLateSyncKeepsNewerHold`). "Later" is read from the holds' expiries, so a Budget shared again with a
//     shorter interval, or whose clock stepped back, keeps the largest of its holds until the earlier expiry.
//
// `SetFleet` then grants a retry at time t only when
//
//  1. R + ρ·(local + fleet first attempts in the window) − (local + fleet retries in the window) ≥ 1, and
//  2. the retries this process granted since the counts its last sync pushed, plus this one, are at most
//     lease + ρ·(its first attempts since those counts), and the lease, at most L old, has not ended.
//
// Before leases, rule 2 gave every process an allowance max(1, m·I) of its own after every sync. The derivation
// counted the unseen grants once per span, but every process regained its allowance at every sync, and whenever
// the window's total dipped below R each could spend it before the others saw it: the fleet behaved as one
// Budget with reserve R + P·allowance, and the excess grew with the run (8 processes, m = 5, W = 2 s, Ratio −1,
// 60 s: 480 retries against a bound of 320; 32 processes: 960). A lease is handed out by the store, atomically,
// against what every other process holds, so the fleet cannot spend the same headroom twice.
//
// Claim. Over any span [s, s+T], while every process syncs successfully, the retries granted across the
// fleet are at most
//
//	ρ·F + m·(T + 2W)
//
// where F counts the fleet's first attempts in [s − W − L, s + T]: one Budget's bound, whatever P.
//
// Derivation. (i) A single local Budget grants, over any span, at most ρ·(first attempts from one window
// before the span on) + m·(T + 2W): each grant satisfies R + ρ·a − b ≥ 1 over its window with exact counts, and
// the window, kept in ten slots, forgets events early, never late (the core's documented bound). (ii) Ledger:
// call a retry covered at time x if it is in the store's window (pushed) or within its process's hold. A
// retry granted by process i is covered from its grant until its push by i's hold (rule 2 bounds what i grants
// since its pushed counts by its lease, and the hold is at least the lease, and at least what the previous
// lease could still grant while the new one was on its way; grants funded by ρ × i's own unpushed first
// attempts are matched by first attempts that are in F), and from its push, dated no earlier than its grant,
// for 0.9 W to W by the slot it was pushed into: so it is covered for at least as long as a local Budget
// remembers it. (iii) A lease is handed out at a script run x only from what the ledger does not cover:
// lease ≤ R + ρ·A(x) − (everything covered at x). So every grant at t, made on a lease handed out at
// x ∈ [t − L, t], satisfies (retries granted fleet-wide in its window) + 1 ≤ R + ρ·(first attempts pushed by
// x, in the window at x) + ρ·(first attempts made since): that is rule 1 of one ideal Budget with exact retry
// counts whose first attempts earn credit for up to W + L instead of W. Applying (i) to that Budget gives the
// claim, with F starting W + L before the span.
//
// What the lease costs: a process whose lease is spent refuses a retry rather than wait for the store (the
// request path never waits); its next sync, at most one interval later, leases it what it asked for from the
// headroom no other process holds, for its next calls (the refused call has ended). So when the fleet is quiet
// and P is larger than the headroom (500 pods with the defaults share R = 10), at most R retries are held across
// the fleet at any time, as one Budget would allow, and single retries go round, mostly among idle processes:
// most first retries after a quiet spell are refused (100 quiet processes sharing a reserve of 10, 3,000
// failing calls in 60 s, granted 60–79 retries, 19–25 % of the bound, against 121 % before leases). With a
// window shorter than about two sync intervals a lease outlives the window, and the fleet grants well under the
// bound (W = 50 ms: 29 % of it; 200 ms: 64–66 %); with windows of 2 s and 10 s the long runs reached 94–97 % of
// it.
//
// Before its first sync answers, a shared Budget holds a lease of 0 (rule 2 with lease 0: Ratio × its own
// first attempts): deciding locally, each process that starts with the others would spend a reserve R of its
// own that no other process sees (`TestFirstSyncLateWithinBound`). A first sync that fails is a fault, below.
//
// Faults. When a sync fails, the process decides locally (its own full reserve R) until a sync succeeds again:
// during an outage of the store the fleet is bounded as P local budgets are (the floor times P), never worse,
// and each process whose sync failed adds at most its own R plus the floor over the episode to the bound (the
// fleet tests allow m·(W + 2I) per fallback). A process that rejoins after its counts could not be pushed for
// longer than an interval plus max(slot, interval) pushes neither its first attempts nor its retries of that
// time: both would be dated late (late first attempts would earn credit for a window too long; late retries
// would hold the fleet's headroom for a whole window after the store is back, and no retry was granted for 4–5 s
// while first attempts flowed). Dropping both, the fleet's headroom after the outage is what the window holds,
// and retries resume at the first sync (`TestRetriesResumeAfterOutage`); for one window after the rejoin, the
// retries that process granted while local are not in the fleet's counts, and the bound grows by them, as it
// does for the outage. A process whose syncs all succeeded but came late (the process was stalled: CPU
// throttling, a paused VM) drops only its first attempts: its retries were granted under its lease, which only
// its hold covered until this sync replaces it, so they are pushed, however late (dropped, the others never saw
// them: eight processes stalling 350 ms after each sync granted 200 retries in 20 s against a bound of 120,
// `TestStalledProcessWithinBound`). A stall longer than a hold's life (L plus a slot) leaves that process's
// grants of its last lease unseen from the hold's expiry to the late push: such a stall adds at most that lease
// to the bound. The store being slow never delays a request: the request path reads only atomics and the
// Budget's mutex.
//
// The Throttle shares the same way (rule 1 becomes the Throttle's rule over local + fleet requests and accepts,
// with the same cap on the rejection probability; no rule 2 and no lease, as it has no hard bound to keep). As the
// attempts a Throttle rejects are not counted (unless CountRejected), the fleet's counts after an outage hold only
// the probes the capped rule let through, so the fleet recovers as one Throttle does, within a sync interval of
// it, and a process that joins during an outage gets the fleet's capped probability and probes its share
// (`fleettest.ShareThrottleRecovers`).
//
// Measured (`go test -run 'TestFleetBoundLongRuns' -v ./internal/fleet/`): the engine in virtual time
// (`testing/synctest`) against an in-memory store that runs the script's semantics; `TestMemStoreMatchesScript`
// runs the same sequence of syncs against it and the real script on a real `redis-server` and requires identical
// replies. The figures are in the README.
//
// Keys: `{prefix}:budget:w<window ms>:<slot>` and `{prefix}:throttle:…`, slot = Unix time / (W/10) (processes
// need clocks within a slot of each other, which NTP gives); one hash per slot with fields `a` and `b` and,
// per process, `<token>:a` and `<token>:b` (its own share; the token is random, one per shared object for its life); per process a
// mark key `{prefix}:budget:w<window ms>:p:<token>` with the cumulative counts it pushed; for a Budget's
// leases, one hash `{prefix}:budget:w<window ms>:lease` (each live process's hold under its token, and their sum
// in `total`) and one sorted set `…:lease:exp` (each hold's expiry, Unix ms by the process's clock), so that a
// sync purges expired holds in O(log P) and never reads every process's. Counts that could not be pushed for
// longer than an interval plus max(slot, interval) (the store was down) are marked as pushed without being added
// (both counts, of a Budget and of a Throttle, after a failed sync; a Budget whose syncs all succeeded drops only
// its first attempts, see Faults), as they would be dated too late. What a Budget or Throttle counted before it was shared is not pushed (only what follows
// `retryshare.Budget`); the token is kept for the object's life, so sharing it again after `Close` continues from the
// same mark. The script sets a TTL of 1.2 W + I on every key it writes and never writes a key of another type; values that
// are not counts (decimals of at most 15 digits) read as bad data (logged once, counted as 0), and a slot holding
// one is not written: this process's counts then wait for the next slot while it keeps deciding with the fleet's
// counts and gets no new lease (it grants only what its hold still covers and Ratio × its own first attempts),
// so for up to a slot those grants are unseen by the others and the bound grows by them (foreign data under the
// prefix is an operator's error, logged; lease keys of another type or a hold that is not a count mean no lease). The prefix is a Redis Cluster hash tag (so it may not contain braces), so a sync touches
// one cluster slot; the window length in the name keeps processes with different
// windows apart.
package fleet

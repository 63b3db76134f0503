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
// go to the Budget or Throttle through SetFleet. The request path never
// waits on the store: it reads only what the last sync left.
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
// Notation: P processes share a Budget (Ratio ρ, MinPerSecond m, Window W,
// reserve R = m·W once for the fleet); sync interval I; allowance A = max(1,
// m·I). SetFleet grants a retry at time t only when
//
//  1. R + ρ·(local + fleet first attempts in the window) − (local + fleet
//     retries in the window) ≥ 1, and
//  2. the retries this process granted since its next-to-last sync, plus
//     this one, are at most A + ρ·(its first attempts since then).
//
// Claim: over any span [s, s+T], while every process syncs successfully at
// least once per interval, the retries granted across the fleet are at most
//
//	ρ·F + m·(T + 2W) + Σ over processes of (A + ρ·f_j)
//
// where F counts the fleet's first attempts in [s − W − I, s + T] and f_j
// the first attempts process j made since its next-to-last sync (at most two
// intervals before s + T): the slack is one sync interval's local allowance
// per process. (A process that starts sharing a Budget it already used does
// not push what it counted before: for one window after it started, its
// retries of the window before are seen by itself only, and the bound grows
// by them, as it would if that process had not shared yet.)
//
// Derivation. (i) A single local Budget grants, over any span, at most
// ρ·(first attempts from one window before the span on) + m·(T + 2W) (the
// core's documented bound: each grant satisfies rule 1 with exact counts;
// the window is kept in ten slots and forgets events early, never late).
// (ii) Compare the fleet with one ideal Budget that sees every process's
// counts at once. Process i decides with its own counts (exact) and the
// others' counts as of its last sync r_i ≥ t − I. Compared with the ideal:
// others' first attempts since r_i are missing (refuses more, never grants
// more); others' events that aged out since r_i are still counted, which for
// retries refuses more and for first attempts stretches their credit by at
// most I (hence F starts at s − W − I); and others' retries granted but not
// yet visible to i are missing. (iii) That last term is the slack. Process
// j's grants are visible to i once j pushed them and i read after the push.
// i's last read r_i is less than one interval old and j's syncs are at least
// an interval apart, so j's last push before r_i is no earlier than j's
// next-to-last sync q_j; the grants i cannot see are among those j made
// since q_j, at most A + ρ·f_j by rule 2. The ideal Budget's bound from (i),
// plus the grants each process can make unseen, gives the claim.
//
// When a sync fails, the process decides locally (its own full reserve R)
// until a sync succeeds again: during an outage of the store the fleet is
// bounded as P local budgets are (the floor times P), never worse. The store
// being slow never delays a request: the request path reads only atomics and
// the Budget's mutex.
//
// The Throttle shares the same way (rule 1 becomes the SRE formula over
// local + fleet requests and accepts; no rule 2 is needed, as it has no hard
// bound to keep).
//
// Keys: {prefix}:budget:w<window ms>:<slot> and {prefix}:throttle:…, slot =
// Unix time / (W/10) (processes need clocks within a slot of each other,
// which NTP gives); one hash per slot with fields a and b and, per process,
// <token>:a and <token>:b (its own share; the token is random, one per
// shared object for its life); per process a mark key
// {prefix}:budget:w<window ms>:p:<token> with the cumulative counts it
// pushed. Counts that could not be pushed for longer than an interval plus
// max(slot, interval) (the store was down) are marked as pushed without
// being added (a Budget's first attempts; both of a Throttle's counts), as
// they would be dated too late. What a Budget or Throttle counted before it
// was shared is not pushed (only what follows ShareBudget); the token is
// kept for the object's life, so sharing it again after Close continues from
// the same mark. The script sets a TTL of 1.2 W + I on every key it writes
// and never writes a key of another type; values that are not counts
// (decimals of at most 15 digits) read as bad data (logged once, counted as
// 0), and a slot holding one is not written: this process's counts then wait
// for the next slot while it keeps deciding with the fleet's counts, so for
// up to a slot its grants are unseen by the others and the bound's slack
// grows by them (foreign data under the prefix is an operator's error,
// logged). The prefix is a Redis Cluster hash tag (so it may not contain
// braces), so a sync touches one cluster slot; the window length in the name
// keeps processes with different windows apart.
package fleet

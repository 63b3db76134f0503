package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/fleetseam"
)

// Defaults and limits of a Config.
const (
	// DefaultInterval is the time between two syncs: 10 per second.
	DefaultInterval = 100 * time.Millisecond
	// MinInterval is the shortest interval accepted: at most 10 syncs per
	// second per shared Budget or Throttle.
	MinInterval = 100 * time.Millisecond
)

// rejoinTimeout bounds a sync made while the process decides locally.
const rejoinTimeout = time.Second

// ErrNoScript is what a Store's EvalSHA returns (or wraps) when the server
// does not know the script (NOSCRIPT): the engine then loads it again.
var ErrNoScript = errors.New("fleet: NOSCRIPT")

// Store is a client adapter. Implementations must be safe for use by one
// goroutine while the client serves others, and must honour ctx.
type Store interface {
	// Load loads script into the server's script cache (SCRIPT LOAD) and
	// returns its SHA-1.
	Load(ctx context.Context, script string) (sha string, err error)
	// EvalSHA runs the script sha with keys and args and returns its
	// reply, an array of integers. When the server answers NOSCRIPT, the
	// error must match ErrNoScript with errors.Is. A reply of another
	// shape is an error.
	EvalSHA(ctx context.Context, sha string, keys, args []string) ([]int64, error)
}

// Config configures an Engine. Name and Prefix are required.
type Config struct {
	// Name is the client module's name, used in errors and log messages
	// ("retryredis").
	Name string
	// Prefix starts every key; see [Keys].
	Prefix string
	// Interval is the time between two syncs. Zero means DefaultInterval
	// (100 ms); values below MinInterval are invalid.
	Interval time.Duration
	// Timeout bounds one sync (with a NOSCRIPT reload) while the process
	// decides with the fleet's counts. Zero means Interval; values above
	// Interval, or negative, are invalid. While the process decides
	// locally (before the first sync, after a failure) a sync may take up
	// to 1 s, as nothing waits on it.
	Timeout time.Duration
	// Logger receives the switches to local and back, and bad data. Nil
	// means slog.Default(), and so does a Logger without a handler.
	Logger *slog.Logger
}

func (c *Config) resolve() error {
	if c.Prefix == "" {
		return fmt.Errorf("%s: the key prefix must not be empty", c.Name)
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		// The prefix is the keys' Redis Cluster hash tag: a brace in it
		// would end the tag early, and the keys of one sync could land in
		// different cluster slots (CROSSSLOT).
		return fmt.Errorf("%s: the key prefix %q must not contain { or }", c.Name, c.Prefix)
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Interval < MinInterval {
		return fmt.Errorf("%s: sync interval %v is below the minimum %v (at most 10 syncs per second)", c.Name, c.Interval, MinInterval)
	}
	if c.Timeout == 0 {
		c.Timeout = c.Interval
	}
	if c.Timeout < 0 || c.Timeout > c.Interval {
		return fmt.Errorf("%s: sync timeout %v must be positive and at most the interval %v", c.Name, c.Timeout, c.Interval)
	}
	if c.Logger == nil || c.Logger.Handler() == nil { // a zero slog.Logger has no handler
		c.Logger = slog.Default()
	}
	return nil
}

// counter is what the engine syncs: a Budget or a Throttle.
type counter interface {
	local() (a, b int64)
	set(a, b int64, l fleetseam.Lease)
	clear()
}

// tokens holds the token of each Budget or Throttle that was shared, for
// as long as it lives, so that sharing it again after Close continues from
// what its earlier shares pushed (the mark key and the own share of each
// slot are the token's).
var tokens sync.Map // weak.Pointer[retry.Budget] or weak.Pointer[retry.Throttle] -> string

// tokenOf returns obj's token, a new random one the first time.
func tokenOf(obj any) string {
	t := strconv.FormatUint(rand.Uint64(), 36)
	switch o := obj.(type) {
	case *retry.Budget:
		return tokenFor(o, t)
	case *retry.Throttle:
		return tokenFor(o, t)
	}
	return t
}

func tokenFor[T any](o *T, t string) string {
	k := weak.Make(o)
	if v, loaded := tokens.LoadOrStore(k, t); loaded {
		return v.(string)
	}
	runtime.AddCleanup(o, func(k weak.Pointer[T]) { tokens.Delete(k) }, k)
	return t
}

// active holds the Budgets and Throttles being synced, so that one is never
// synced twice (each engine would count the other's pushes of the same
// local events as the fleet's).
var active sync.Map

// budgetSeam and throttleSeam are the core's sharing seam, which package
// retry (imported, so initialised first) registers with fleetseam.
var (
	budgetSeam   = fleetseam.BudgetOf[*retry.Budget]()
	throttleSeam = fleetseam.ThrottleOf[*retry.Throttle]()
)

type budgetCounter struct{ b *retry.Budget }

func (c budgetCounter) local() (int64, int64)             { return budgetSeam.LocalCounts(c.b) }
func (c budgetCounter) set(a, b int64, l fleetseam.Lease) { budgetSeam.SetFleet(c.b, a, b, l) }
func (c budgetCounter) clear()                            { budgetSeam.ClearFleet(c.b) }

type throttleCounter struct{ t *retry.Throttle }

func (c throttleCounter) local() (int64, int64)             { return throttleSeam.LocalCounts(c.t) }
func (c throttleCounter) set(a, b int64, _ fleetseam.Lease) { throttleSeam.SetFleet(c.t, a, b) }
func (c throttleCounter) clear()                            { throttleSeam.ClearFleet(c.t) }

// Engine syncs one Budget or Throttle. Get one with [StartBudget] or
// [StartThrottle]; stop it with Close.
type Engine struct {
	cfg   Config
	store Store
	ctr   counter
	kind  string
	slot  time.Duration
	keys  func(slot int64) []string
	what  string // "budget" or "throttle", for messages

	ctx  context.Context // cancelled by Close
	stop context.CancelFunc
	done chan struct{}

	// token names the shared object's own share of each slot and its
	// mark key (see [Script]), so that the script, not this process,
	// subtracts its own counts and knows what a sync whose reply was lost
	// pushed; it is the object's for its life (see tokenOf).
	token string
	mark  string // the mark key, the last of every sync's keys

	// A Budget's lease (see [Script]); budget is nil for a Throttle.
	budget             *retry.Budget
	reserve, ratio     float64 // the Budget's, resolved (ratio ≥ 0)
	leaseKeys          [2]string
	life               time.Duration // how long a lease holds (see leaseLife), at most a day
	lease              fleetseam.Lease
	leased             bool    // lease is in force: the last sync succeeded
	pending            bool    // the first sync has not ended: the Budget holds a lease of 0 (see start)
	askedAt            int64   // FleetAsked as of the last successful sync
	asked              int64   // FleetAsked as read for the current sync
	demand, demandNext float64 // retries asked per sync, decayed (see leaseArgs)

	// Owned by the sync goroutine.
	sha              string
	pushedA, pushedB int64 // local cumulative counts known to be pushed
	lastOK           time.Time
	keyBuf           [slots + 3]string
	badLogged        bool
	localLogged      bool            // the switch to local was logged, not yet the way back
	inflight         chan evalResult // a store call given up on, until it ends
	obj              any             // the Budget or Throttle, key in active

	shared   atomic.Bool
	syncs    atomic.Int64 // successful syncs
	failures atomic.Int64 // failed syncs
	switches atomic.Int64 // shared → local switches
}

// slots is the number of slots of a window (as in the core).
const slots = 10

// StartBudget starts syncing b under cfg.Prefix. Until the first sync
// answers, b grants retries only from Ratio × the first attempts it counts
// from now (the floor is the fleet's, leased by the store); if that sync
// fails, b decides locally until one succeeds.
func StartBudget(cfg Config, s Store, b *retry.Budget) (*Engine, error) {
	if b == nil {
		return nil, fmt.Errorf("%s: nil *retry.Budget", cfg.Name)
	}
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	return start(cfg, s, budgetCounter{b}, "budget", budgetWindow(b), b)
}

// StartThrottle starts syncing t under cfg.Prefix. The Throttle stays
// local until the first sync succeeds.
func StartThrottle(cfg Config, s Store, t *retry.Throttle) (*Engine, error) {
	if t == nil {
		return nil, fmt.Errorf("%s: nil *retry.Throttle", cfg.Name)
	}
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	return start(cfg, s, throttleCounter{t}, "throttle", throttleSeam.Window(t), t)
}

// budgetWindow is b's Window, the default resolved.
func budgetWindow(b *retry.Budget) time.Duration {
	_, _, w := budgetSeam.Settings(b)
	return w
}

func start(cfg Config, s Store, c counter, kind string, window time.Duration, obj any) (*Engine, error) {
	e, err := newEngine(cfg, s, c, kind, window, obj)
	if err != nil {
		return nil, err
	}
	go e.run()
	return e, nil
}

// newEngine returns the engine that start runs, registered in active: its
// goroutine is not started.
func newEngine(cfg Config, s Store, c counter, kind string, window time.Duration, obj any) (*Engine, error) {
	if s == nil {
		return nil, fmt.Errorf("%s: nil client", cfg.Name)
	}
	if _, loaded := active.LoadOrStore(obj, true); loaded {
		return nil, fmt.Errorf("%s: this %s is already shared; Close its Share first", cfg.Name, kind)
	}
	e := &Engine{cfg: cfg, store: s, ctr: c, kind: kind, what: kind, obj: obj,
		slot: window / slots, done: make(chan struct{})}
	e.ctx, e.stop = context.WithCancel(context.Background())
	e.keys = Keys(cfg.Prefix, kind, window)
	e.token = tokenOf(obj)
	// What the Budget or Throttle counted before it was shared is not
	// pushed: dated now, a history of any length would land in one slot
	// (and, for a second share of the same object, again).
	e.pushedA, e.pushedB = c.local()
	// Counted from now, as if pushed now: counts that cannot be pushed for
	// too long (the store is down at start) are dropped like any others.
	e.lastOK = time.Now()
	e.mark = keyBase(cfg.Prefix, kind, window) + "p:" + e.token
	if b, ok := obj.(*retry.Budget); ok {
		ratio, floor, win := budgetSeam.Settings(b)
		e.budget = b
		e.reserve = max(floor, 0) * win.Seconds()
		e.ratio = max(ratio, 0)
		base := keyBase(cfg.Prefix, kind, window)
		e.leaseKeys = [2]string{base + "lease", base + "lease:exp"}
		// At most a day: a process that syncs less often refuses what
		// its lease does not cover once the lease has ended.
		e.life = min(leaseLife(cfg), 24*time.Hour)
		e.askedAt = budgetSeam.FleetAsked(b)
		// Until the first sync answers, the Budget grants only Ratio × its
		// own first attempts: deciding locally, with its own full reserve,
		// every process that starts with the others (a rollout, pods added
		// during an incident) would spend a floor of its own before the
		// store had leased it anything. A first sync that fails makes it
		// local (a fault, as any failed sync). The lease lasts as long as
		// that sync may (its timeout, at least rejoinTimeout), plus an
		// interval of lateness, each capped at a day so as not to overflow.
		wait := min(max(cfg.Timeout, rejoinTimeout), 24*time.Hour) + min(cfg.Interval, 24*time.Hour)
		budgetSeam.SetFleet(b, 0, 0, fleetseam.Lease{FirstAttempts: e.pushedA, Granted: e.pushedB, Until: e.lastOK.Add(wait)})
		e.pending = true
	}
	return e, nil
}

// Keys returns the function that names the window's slot keys, newest
// first, for the epoch slot number k (Unix time / (window/10)):
//
//	{prefix}:kind:w<window in ms>:<slot number>
//
// Each engine also has a mark key, {prefix}:kind:w<window in ms>:p:<token>,
// with the cumulative counts it pushed (see [Script]).
//
// The prefix is wrapped in a Redis Cluster hash tag so that one script
// call touches one cluster slot; the window length is part of the name so
// that processes configured with different windows never mix their
// counts.
func Keys(prefix, kind string, window time.Duration) func(k int64) []string {
	base := keyBase(prefix, kind, window)
	buf := make([]string, slots)
	return func(k int64) []string {
		for i := range slots {
			buf[i] = base + strconv.FormatInt(k-int64(i), 10)
		}
		return buf
	}
}

// keyBase is what every key of one kind and window starts with:
// "{prefix}:kind:w<window in ms>:".
func keyBase(prefix, kind string, window time.Duration) string {
	return "{" + prefix + "}:" + kind + ":w" + strconv.FormatInt(window.Milliseconds(), 10) + ":"
}

// Close stops the sync goroutine, waits for it to end and leaves the
// Budget or Throttle local; it may then be shared again. It is safe to
// call more than once.
func (e *Engine) Close() {
	e.stop()
	<-e.done
}

// Shared reports whether the last sync succeeded, so that the Budget or
// Throttle currently decides with the fleet's counts.
func (e *Engine) Shared() bool { return e.shared.Load() }

// Stats returns the number of successful syncs, failed syncs and switches
// from shared to local so far.
func (e *Engine) Stats() (syncs, failures, fallbacks int64) {
	return e.syncs.Load(), e.failures.Load(), e.switches.Load()
}

func (e *Engine) run() {
	defer close(e.done)
	defer active.Delete(e.obj)
	defer e.ctr.clear()
	t := time.NewTicker(e.cfg.Interval)
	defer t.Stop()
	e.syncOnce()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
			e.syncOnce()
		}
	}
}

// syncOnce runs one sync and applies its outcome. Called only by run.
func (e *Engine) syncOnce() {
	// While shared, a sync that outlasts Timeout switches the process to
	// local decisions. While local, nothing waits on the sync, so a slow
	// one (a new connection's handshake on a loaded machine) is given up
	// to rejoinTimeout to succeed rather than failing again and again.
	timeout := e.cfg.Timeout
	if !e.shared.Load() {
		timeout = max(timeout, rejoinTimeout)
	}
	ctx, cancel := context.WithTimeout(e.ctx, timeout) // Close interrupts it too
	defer cancel()
	now := time.Now()
	k := now.UnixNano() / int64(e.slot)
	la, lb := e.ctr.local()
	var dropA, dropB bool
	if now.Sub(e.lastOK) > e.cfg.Interval+max(e.slot, e.cfg.Interval) { // lastOK starts at start
		// Counts that could not be pushed for more than a slot beyond a
		// regular sync's lateness (one interval, or two when a slot is
		// shorter than an interval: scheduling jitter) would be dated too
		// late: the store was down. Drop both: late first attempts would
		// earn credit for too long, and late retries, dated now, would
		// hold the fleet's headroom for a whole window after the store is
		// back (no retries while first attempts flow). What the process
		// did while local is bounded as a local Budget is.
		//
		// But a Budget's retries granted under a lease (every sync since
		// the last push succeeded: the process was stalled, not cut off)
		// are pushed however late: only its hold covered them, which this
		// sync replaces, and dated late they hold headroom longer, never
		// shorter. Dropped, they were never seen by the others.
		dropA, dropB = true, !e.leased
	}
	var reply []int64
	var err error
	if e.inflight != nil {
		select {
		case <-e.inflight: // a call given up on ended: its reply is stale
			e.inflight = nil
		default:
		}
	}
	if e.inflight != nil {
		// A call given up on is still running (a client that ignores the
		// context's deadline): never two at once, and this sync fails.
		err = fmt.Errorf("%s: sync: an earlier sync is still waiting for the server", e.cfg.Name)
	} else {
		keys := append(append(e.keyBuf[:0], e.keys(k)...), e.mark)
		args := e.args(la, lb, dropA, dropB)
		if e.budget != nil {
			keys = append(keys, e.leaseKeys[:]...)
			args = append(args, e.leaseArgs(now, la, lb)...)
		}
		reply, err = e.evalWithin(ctx, keys, args)
	}
	want := 1 + 2*slots
	if e.budget != nil {
		want++
	}
	if err == nil && len(reply) != want {
		err = fmt.Errorf("%s: sync script answered %d values, want %d", e.cfg.Name, len(reply), want)
	}
	if err != nil {
		e.failures.Add(1)
		if e.shared.Swap(false) {
			e.ctr.clear()
			e.switches.Add(1)
		} else if e.pending {
			e.ctr.clear() // the first sync failed: local, not a switch
		}
		e.leased, e.pending = false, false
		if !e.localLogged && e.ctx.Err() == nil {
			e.localLogged = true
			e.cfg.Logger.Warn(e.cfg.Name+": shared "+e.what+" store unavailable; deciding locally until it is back",
				"prefix", e.cfg.Prefix, "error", err)
		}
		return
	}
	if reply[0] == 1 {
		e.pushedA, e.pushedB = la, lb
		e.lastOK = now
	}
	var ra, rb int64
	bad := reply[0] != 1
	for i := range slots {
		ta, tb := reply[1+2*i], reply[2+2*i]
		if ta < 0 || tb < 0 {
			bad = true
		}
		ra = addCount(ra, ta)
		rb = addCount(rb, tb)
	}
	var lease fleetseam.Lease
	if e.budget != nil {
		lease = fleetseam.Lease{Retries: max(reply[1+2*slots], 0), FirstAttempts: la, Granted: lb, Until: now.Add(e.life)}
		bad = bad || reply[1+2*slots] < 0
		e.lease, e.leased, e.pending = lease, true, false
		e.askedAt, e.demand = e.asked, e.demandNext
	}
	if bad && !e.badLogged {
		e.cfg.Logger.Error(e.cfg.Name+": data under the key prefix that this "+e.what+" did not write; ignored",
			"prefix", e.cfg.Prefix, "keys", e.keys(k)[0]+" and older")
	}
	e.badLogged = bad
	e.ctr.set(ra, rb, lease)
	e.syncs.Add(1)
	e.shared.Store(true)
	if e.localLogged {
		e.localLogged = false
		e.cfg.Logger.Info(e.cfg.Name+": shared "+e.what+" store is back; deciding with the fleet again", "prefix", e.cfg.Prefix)
	}
}

// addCount returns s+v for the counts of a slot, counting a negative v
// (bad data) as 0 and saturating instead of overflowing.
func addCount(s, v int64) int64 {
	if v <= 0 {
		return s
	}
	if v > math.MaxInt64-s {
		return math.MaxInt64
	}
	return s + v
}

// evalResult is the outcome of one store call.
type evalResult struct {
	reply []int64
	err   error
}

// evalWithin runs eval on a goroutine of its own and waits for it at most
// until ctx is done, whether or not the Store honours ctx (go-redis, unless
// ContextTimeoutEnabled, waits its ReadTimeout, 3 s by default; valkey-go
// only its deadline): a sync that outlasts its timeout fails on time, and
// Close does not wait for the server. A call given up on is left to end by
// itself (e.inflight); until it has, no other is made, and what it pushed
// is not pushed again (the script's mark key).
func (e *Engine) evalWithin(ctx context.Context, keys, args []string) ([]int64, error) {
	ch := make(chan evalResult, 1)
	go func() {
		reply, err := e.eval(ctx, keys, args)
		ch <- evalResult{reply, err}
	}()
	select {
	case r := <-ch:
		return r.reply, r.err
	case <-ctx.Done():
		e.inflight = ch
		return nil, fmt.Errorf("%s: sync: %w", e.cfg.Name, ctx.Err())
	}
}

// args returns the script's arguments; la and lb are the cumulative local
// counts.
func (e *Engine) args(la, lb int64, dropA, dropB bool) []string {
	// 1.2 windows plus an interval, saturating for a window of centuries.
	ttl := time.Duration(math.MaxInt64)
	if e.slot <= (math.MaxInt64-e.cfg.Interval)/(slots+2) {
		ttl = e.slot*(slots+2) + e.cfg.Interval
	}
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	return []string{strconv.FormatInt(la, 10), strconv.FormatInt(lb, 10), strconv.FormatInt(ttl.Milliseconds()+1, 10),
		e.token, flag(dropA), flag(dropB), strconv.FormatInt(e.pushedA, 10), strconv.FormatInt(e.pushedB, 10)}
}

// leaseLife is how long a lease holds: until the next sync has had its
// timeout, plus one interval of scheduling lateness.
func leaseLife(c Config) time.Duration {
	if c.Interval > (math.MaxInt64-c.Timeout)/2 {
		return math.MaxInt64
	}
	return 2*c.Interval + c.Timeout
}

// leaseArgs returns a Budget's lease arguments of the script for a sync
// made at now with the cumulative local counts la and lb: the fleet's
// reserve and ratio, the clock and the expiry of this process's hold in
// Unix ms, its demand, and what its current lease may still grant until
// the next SetFleet (the least its hold may be).
//
// The demand is the retries it asked for (granted or refused) in the
// last sync interval, or, if more, its earlier demand decayed by a tenth
// per sync: a process whose calls come less often than its syncs (one
// every other interval) would otherwise be leased retries in the
// intervals after it asked and none in those it asks in. It falls below
// one half, and the lease to the fair share, some 17 syncs after the last
// ask.
func (e *Engine) leaseArgs(now time.Time, la, lb int64) []string {
	e.asked = budgetSeam.FleetAsked(e.budget)
	e.demandNext = max(float64(max(e.asked-e.askedAt, 0)), 0.9*e.demand)
	var rest float64
	if l := e.lease; e.leased && now.Before(l.Until) {
		rest = max(0, math.Floor(float64(l.Retries)+e.ratio*float64(la-l.FirstAttempts)-float64(lb-l.Granted)))
	}
	// Other processes' clocks may be up to a slot ahead (the slot keys
	// need that much agreement anyway): the store keeps the hold that
	// much longer than the process uses its lease.
	exp := now.Add(e.life + min(e.slot, time.Hour))
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{f(e.reserve), f(e.ratio), strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(exp.UnixMilli()+1, 10),
		f(math.Round(e.demandNext)), f(rest)}
}

// eval runs the script, loading it first if needed and again on NOSCRIPT.
// It touches no state of e but e.sha, and runs while syncOnce waits for it
// or, given up on, before any other call (see evalWithin).
func (e *Engine) eval(ctx context.Context, keys, args []string) ([]int64, error) {
	for try := 0; ; try++ {
		if e.sha == "" {
			sha, err := e.store.Load(ctx, Script)
			if err != nil {
				return nil, fmt.Errorf("%s: load sync script: %w", e.cfg.Name, err)
			}
			e.sha = sha
		}
		reply, err := e.store.EvalSHA(ctx, e.sha, keys, args)
		if err != nil && errors.Is(err, ErrNoScript) && try == 0 {
			e.sha = ""
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: sync: %w", e.cfg.Name, err)
		}
		return reply, nil
	}
}

package fleet

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// memStore is an in-memory Store that runs [Script]'s semantics in Go,
// on the clock of the caller (the bubble's, under synctest), so that a
// fleet's long runs take virtual time, not wall time. It keeps hashes and
// sorted sets only: it knows no foreign data (a key of another type), which
// the tests against a real redis-server cover. TestMemStoreMatchesScript
// runs the same calls against it and the real script and requires
// identical replies, so that it cannot drift from the script.
type memStore struct {
	mu   sync.Mutex
	hash map[string]map[string]string
	zset map[string]map[string]float64
	exp  map[string]time.Time
	// down, when true, makes every call fail unsent.
	down bool
	// gate, when not nil, holds every call until it is closed.
	gate chan struct{}
}

func newMemStore() *memStore {
	return &memStore{hash: map[string]map[string]string{}, zset: map[string]map[string]float64{}, exp: map[string]time.Time{}}
}

func (m *memStore) setDown(d bool) {
	m.mu.Lock()
	m.down = d
	m.mu.Unlock()
}

// wait holds a call until the gate, if any, is closed.
func (m *memStore) wait() {
	m.mu.Lock()
	g := m.gate
	m.mu.Unlock()
	if g != nil {
		<-g
	}
}

func (m *memStore) Load(context.Context, string) (string, error) {
	m.wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return "", errDown
	}
	return "mem", nil
}

func (m *memStore) EvalSHA(_ context.Context, _ string, keys, args []string) ([]int64, error) {
	m.wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, errDown
	}
	return m.run(keys, args)
}

// expire drops k if its TTL has passed.
func (m *memStore) expire(k string) {
	if e, ok := m.exp[k]; ok && !time.Now().Before(e) {
		delete(m.hash, k)
		delete(m.zset, k)
		delete(m.exp, k)
	}
}

func (m *memStore) typ(k string) string {
	m.expire(k)
	if _, ok := m.hash[k]; ok {
		return "hash"
	}
	if _, ok := m.zset[k]; ok {
		return "zset"
	}
	return "none"
}

func (m *memStore) hget(k, f string) (string, bool) {
	m.expire(k)
	v, ok := m.hash[k][f]
	return v, ok
}

func (m *memStore) hset(k, f, v string) {
	m.expire(k)
	if m.hash[k] == nil {
		m.hash[k] = map[string]string{}
	}
	m.hash[k][f] = v
}

func (m *memStore) hincr(k, f string, d int64) {
	v, _ := m.hget(k, f)
	n, _ := strconv.ParseInt(v, 10, 64)
	m.hset(k, f, strconv.FormatInt(n+d, 10))
}

func (m *memStore) pexpire(k string, ms int64) {
	if m.typ(k) != "none" {
		m.exp[k] = time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
}

var countRE = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// count is the script's count: 0 for a missing value, -1 for one that is
// not a count as HINCRBY writes it.
func count(v string, ok bool) int64 {
	if !ok {
		return 0
	}
	if len(v) > 15 || !countRE.MatchString(v) {
		return -1
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

func (m *memStore) run(keys, args []string) ([]int64, error) {
	n := len(keys) - 1
	var lk, lz string
	lease := len(args) >= 9
	if lease {
		n, lk, lz = len(keys)-3, keys[len(keys)-2], keys[len(keys)-1]
	}
	num := func(i int) float64 {
		f, err := strconv.ParseFloat(args[i], 64)
		if err != nil {
			panic("memStore: argument " + strconv.Itoa(i+1) + ": " + err.Error())
		}
		return f
	}
	cur, mk := keys[0], keys[n]
	la, lb, ttl := int64(num(0)), int64(num(1)), int64(num(2))
	fa, fb := args[3]+":a", args[3]+":b"
	pa, pb := int64(num(6)), int64(num(7))
	mt := m.typ(mk)
	if mt == "hash" {
		pa = max(pa, count(m.hget(mk, "a")))
		pb = max(pb, count(m.hget(mk, "b")))
	}
	da, db := max(la-pa, 0), max(lb-pb, 0)
	if args[4] == "1" {
		da = 0
	}
	if args[5] == "1" {
		db = 0
	}
	var pushed int64
	if t := m.typ(cur); t == "none" || t == "hash" {
		ok := true
		for _, f := range []string{"a", "b", fa, fb} {
			if count(m.hget(cur, f)) < 0 {
				ok = false
			}
		}
		if ok {
			if da > 0 {
				m.hincr(cur, "a", da)
				m.hincr(cur, fa, da)
			}
			if db > 0 {
				m.hincr(cur, "b", db)
				m.hincr(cur, fb, db)
			}
			pushed = 1
			if (la > pa || lb > pb) && (mt == "none" || mt == "hash") {
				m.hset(mk, "a", args[0])
				m.hset(mk, "b", args[1])
				m.pexpire(mk, ttl)
			}
		}
		m.pexpire(cur, ttl)
	}
	out := []int64{pushed}
	var ta, tb int64
	for _, k := range keys[:n] {
		var a, b int64
		if m.typ(k) == "hash" {
			a, b = count(m.hget(k, "a")), count(m.hget(k, "b"))
			ta, tb = ta+max(a, 0), tb+max(b, 0)
			oa, ob := max(count(m.hget(k, fa)), 0), max(count(m.hget(k, fb)), 0)
			if a >= 0 {
				a = max(a-oa, 0)
			}
			if b >= 0 {
				b = max(b-ob, 0)
			}
		}
		out = append(out, a, b)
	}
	if !lease {
		return out, nil
	}
	granted := int64(-1)
	ht, zt := m.typ(lk), m.typ(lz)
	if (ht == "none" || ht == "hash") && (zt == "none" || zt == "zset") {
		now, exp := int64(num(10)), num(11)
		tok := args[3]
		total := count(m.hget(lk, "total"))
		mine := count(m.hget(lk, tok))
		if total >= 0 && mine >= 0 {
			var gone []string
			for g, s := range m.zset[lz] {
				if s < float64(now) {
					gone = append(gone, g)
				}
			}
			slices.Sort(gone)
			for _, g := range gone {
				if g != tok {
					total -= max(count(m.hget(lk, g)), 0)
				}
				delete(m.hash[lk], g)
				delete(m.zset[lz], g)
			}
			if len(m.zset[lz]) == 0 { // Redis deletes an empty key
				delete(m.zset, lz)
				delete(m.exp, lz)
			}
			total = max(total-mine, 0)
			granted = 0
			prod := float64(num(9) * float64(ta)) // no fused multiply-add: Lua rounds the product
			head := num(8) + prod - float64(tb)
			free := math.Floor(head - float64(total))
			if pushed == 1 && free > 0 {
				live := len(m.zset[lz])
				if _, ok := m.zset[lz][tok]; !ok {
					live++
				}
				want := math.Max(num(12), math.Floor(head/float64(live)))
				if want == 0 && mine == 0 {
					want = 1
				}
				granted = int64(math.Min(math.Min(free, want), 1e9))
			}
			hold := int64(math.Min(math.Max(float64(granted), num(13)), 1e9))
			if last, ok := m.zset[lz][tok]; ok && last > exp {
				hold = max(hold, mine)
			} else {
				if m.zset[lz] == nil {
					m.zset[lz] = map[string]float64{}
				}
				m.zset[lz][tok] = exp
			}
			m.hset(lk, tok, strconv.FormatInt(hold, 10))
			m.hset(lk, "total", strconv.FormatInt(total+hold, 10))
			lttl := ttl + max(int64(exp)-now, 0)
			m.pexpire(lk, lttl)
			m.pexpire(lz, lttl)
		}
	}
	return append(out, granted), nil
}

package pgfault

import "testing"

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		tag, body string
		want      bool
	}{
		{"COMMIT", "COMMIT\x00", true},
		{"COMMIT", "COMMIT PREPARED\x00", true},
		{"COMMIT", "ROLLBACK\x00", false},
		{"COMMIT", "COMMITX\x00", false},
		{"INSERT", "INSERT 0 1\x00", true},
		{"INSERT", "UPDATE 1\x00", false},
	} {
		p := &Proxy{cfg: Config{Tag: c.tag}}
		if got := p.matches([]byte(c.body)); got != c.want {
			t.Errorf("tag %q, body %q: matches = %v; want %v", c.tag, c.body, got, c.want)
		}
	}
}

// TestLoseNext: of the first n statements, floor(n*Lose) are lost, spread
// evenly.
func TestLoseNext(t *testing.T) {
	for _, c := range []struct {
		lose float64
		n    int
		want int
	}{{0, 100, 0}, {0.2, 100, 20}, {0.2, 4, 0}, {0.2, 5, 1}, {0.5, 7, 3}, {1, 9, 9}} {
		p := &Proxy{cfg: Config{Lose: c.lose}}
		lost := 0
		for range c.n {
			if p.loseNext() {
				lost++
			}
		}
		if lost != c.want || p.Applied() != int64(c.n) {
			t.Errorf("Lose %v: %d of %d lost (%d applied); want %d", c.lose, lost, c.n, p.Applied(), c.want)
		}
	}
}

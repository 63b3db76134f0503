package redistest

import "testing"

func TestStartDoRestart(t *testing.T) {
	s := Start(t)
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v; want v", v, err)
	}
	if _, err := s.Do("INCR", "k"); err == nil {
		t.Fatal("INCR on a string: want an error reply")
	}
	if n, err := s.CommandCalls("incr"); err != nil || n != 1 {
		t.Fatalf("CommandCalls(incr) = %d, %v; want 1", n, err)
	}
	s.Restart()
	if v, err := s.Do("GET", "k"); err != nil || v != "" {
		t.Fatalf("after restart GET k = %q, %v; want empty", v, err)
	}
	s.Stop()
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING after Stop: want an error")
	}
}

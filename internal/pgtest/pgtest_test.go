package pgtest

import "testing"

func TestURL(t *testing.T) {
	s := &Server{port: 5999}
	if got, want := s.URL("db1"), "postgres://postgres@127.0.0.1:5999/db1?sslmode=disable"; got != want {
		t.Fatalf("URL = %q; want %q", got, want)
	}
}

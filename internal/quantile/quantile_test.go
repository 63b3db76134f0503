package quantile

import "testing"

func TestWindow(t *testing.T) {
	w := Window{Size: 8, WarmUp: 4, Quantile: 0.5, Floor: 2}
	for i, v := range []int64{10, 20, 30} {
		if got := w.Add(v); got != 0 {
			t.Fatalf("sample %d: value %d during the warm-up", i, got)
		}
	}
	if got := w.Add(40); got != 20 {
		t.Fatalf("median of 10,20,30,40 = %d, want 20", got)
	}
	for range 8 {
		w.Add(1)
	}
	if got := w.Value(); got != 2 {
		t.Fatalf("value %d after 8 samples of 1, want the floor 2 (old samples gone)", got)
	}
	one := Window{Size: 1, Quantile: 0.99}
	if got := one.Add(0); got != 1 {
		t.Fatalf("value %d, want at least 1", got)
	}
}

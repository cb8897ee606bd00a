package stats

import (
	"math"
	"testing"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestMannWhitneyExactKnownValues(t *testing.T) {
	tests := []struct {
		name  string
		a, b  []float64
		wantU float64
		wantP float64
	}{
		{
			// Complete separation of 3 and 3: only 1 of the C(6,3) = 20
			// orderings gives U = 0, and 1 gives U = 9, so p = 2/20.
			name: "complete separation", a: []float64{1, 2, 3}, b: []float64{4, 5, 6},
			wantU: 0, wantP: 0.1,
		},
		{
			name: "complete separation, reversed", a: []float64{4, 5, 6}, b: []float64{1, 2, 3},
			wantU: 9, wantP: 0.1,
		},
		{
			// A textbook example of 5 and 4 values. Ranks of a: 5, 7, 3,
			// 9, 8 (sum 32), so U = 32 - 5·6/2 = 17; 7 of the C(9,4) = 126
			// orderings give U >= 17, so p = 2·7/126.
			name: "five against four", a: []float64{19, 22, 16, 29, 24}, b: []float64{20, 11, 17, 12},
			wantU: 17, wantP: 14.0 / 126,
		},
		{
			// The rank-sum example of R's wilcox.test documentation
			// (W = 35, one-sided p = 0.1272): ranks of x sum to 90, U =
			// 90 - 55; 382 of the C(15,5) = 3003 orderings give U >= 35.
			name:  "ten against five",
			a:     []float64{0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46},
			b:     []float64{1.15, 0.88, 0.90, 0.74, 1.21},
			wantU: 35, wantP: 2 * 382.0 / 3003,
		},
		{
			// U exactly at the centre: p is 1, not more.
			name: "no difference", a: []float64{1, 4}, b: []float64{2, 3},
			wantU: 2, wantP: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, p := MannWhitney(tt.a, tt.b)
			if u != tt.wantU || !near(p, tt.wantP, 1e-12) {
				t.Errorf("MannWhitney = U %v, p %.6f; want U %v, p %.6f", u, p, tt.wantU, tt.wantP)
			}
		})
	}
}

func TestMannWhitneyNormalApproximationWithTies(t *testing.T) {
	// Worked by hand. The 21 values sorted, with their (mean) ranks:
	//   1a:1  2a 2a:2.5  3a 3a 3a 3b:5.5  4a 4b 4b:9  5a 5a 5b 5b:12.5
	//   6a 6b 6b 6b:16.5  7b:19  8b:20  9b:21
	// R_a = 1 + 2(2.5) + 3(5.5) + 9 + 2(12.5) + 16.5 = 73, U = 73 - 10·11/2 = 18.
	// Ties: groups of 2, 4, 3, 4, 4 give Σ(t³-t) = 6 + 60 + 24 + 60 + 60 = 210.
	// Var = 10·11/12 · (22 - 210/(21·20)) = 197.0833, mean 55,
	// z = (|18 - 55| - 0.5) / √197.0833 = 2.59997, p = erfc(z/√2) = 0.0093233.
	a := []float64{1, 2, 2, 3, 3, 3, 4, 5, 5, 6}
	b := []float64{3, 4, 4, 5, 5, 6, 6, 6, 7, 8, 9}
	u, p := MannWhitney(a, b)
	if u != 18 || !near(p, 0.0093233, 1e-6) {
		t.Errorf("MannWhitney = U %v, p %.7f; want U 18, p 0.0093233", u, p)
	}
	// Swapping the samples gives the complementary U and the same p.
	u2, p2 := MannWhitney(b, a)
	if u2 != 110-18 || !near(p2, p, 1e-12) {
		t.Errorf("swapped: U %v, p %v; want U %v, p %v", u2, p2, 110-18, p)
	}
}

func TestMannWhitneyNormalApproximationWithoutTies(t *testing.T) {
	// 21 values each, past ExactMax: a is 1..21, b is 11.5..31.5, so each
	// x in a beats the y below it: U = Σ_{k=12..21} (k-11) = 55.
	// mean 220.5, Var = 21·21·43/12 = 1580.25 (σ = 39.7524),
	// z = (165.5 - 0.5)/39.7524 = 4.15070, p = erfc(z/√2) = 3.3146e-5.
	var a, b []float64
	for i := 1; i <= 21; i++ {
		a = append(a, float64(i))
		b = append(b, float64(i)+10.5)
	}
	u, p := MannWhitney(a, b)
	if u != 55 || !near(p, 3.3146e-5, 1e-9) {
		t.Errorf("MannWhitney = U %v, p %.6g; want U 55, p 3.3146e-5", u, p)
	}
}

func TestMannWhitneyAllEqual(t *testing.T) {
	u, p := MannWhitney([]float64{5, 5, 5}, []float64{5, 5})
	if u != 3 || p != 1 {
		t.Errorf("MannWhitney of equal values = U %v, p %v; want U 3, p 1", u, p)
	}
}

func TestMannWhitneyEmpty(t *testing.T) {
	if _, p := MannWhitney(nil, []float64{1}); !math.IsNaN(p) {
		t.Errorf("p with an empty sample = %v, want NaN", p)
	}
}

// TestUCountsAgainstEnumeration checks the recurrence against counting U
// over every way to choose which of n1+n2 ranks belong to the first sample.
func TestUCountsAgainstEnumeration(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {1, 5}, {3, 4}, {5, 5}, {6, 3}, {7, 8}} {
		n1, n2 := sz[0], sz[1]
		want := make([]float64, n1*n2+1)
		n := n1 + n2
		for mask := 0; mask < 1<<n; mask++ {
			if popcount(mask) != n1 {
				continue
			}
			// Rank r belongs to the first sample when bit r is set; U counts
			// the pairs where a first-sample rank exceeds a second-sample one.
			u, below := 0, 0
			for r := range n {
				if mask&(1<<r) != 0 {
					u += below
				} else {
					below++
				}
			}
			want[u]++
		}
		got := uCounts(n1, n2)
		if len(got) != len(want) {
			t.Fatalf("uCounts(%d, %d) has %d entries, want %d", n1, n2, len(got), len(want))
		}
		for u := range want {
			if got[u] != want[u] {
				t.Errorf("uCounts(%d, %d)[%d] = %v, want %v", n1, n2, u, got[u], want[u])
			}
		}
	}
}

func popcount(x int) int {
	c := 0
	for ; x != 0; x &= x - 1 {
		c++
	}
	return c
}

func TestExactAndNormalAgreeAtExactMax(t *testing.T) {
	// At the largest exact size, the approximation is close: this is why
	// MannWhitney may switch to it beyond ExactMax.
	n := ExactMax
	for _, u := range []float64{100, 130, 150, 170} {
		exact := exactP(n, n, u)
		approx := normalP(n, n, u, 0)
		if !near(exact, approx, 0.005) {
			t.Errorf("U = %v at n = %d: exact p %.5f, normal p %.5f: differ by more than 0.005", u, n, exact, approx)
		}
	}
}

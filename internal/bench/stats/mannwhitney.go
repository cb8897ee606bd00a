package stats

import (
	"math"
	"slices"
)

// ExactMax is the largest sample size for which MannWhitney computes the
// exact distribution of U (when there are no ties). Beyond it the normal
// approximation is within a few thousandths of the exact p-value.
const ExactMax = 20

// MannWhitney runs a two-sided Mann-Whitney U test (the Wilcoxon rank-sum
// test) on two independent samples: is a value from a as likely to be
// larger than one from b as smaller? It makes no assumption about the
// shape of the distributions, which matters for latency percentiles: they
// are skewed and have outliers, so a t-test would mislead.
//
// u is the U statistic of a: the number of pairs (x from a, y from b) with
// x > y, ties counting one half. It ranges from 0 to len(a)*len(b), with
// len(a)*len(b)/2 meaning no difference. p is the two-sided p-value:
//
//   - exact, from the distribution of U under the null hypothesis, when
//     both samples have at most ExactMax values and no value occurs twice;
//   - otherwise from the normal approximation, with the variance corrected
//     for ties and a continuity correction of 1/2.
//
// p is NaN when either sample is empty. The samples must not contain NaN.
func MannWhitney(a, b []float64) (u, p float64) {
	n1, n2 := len(a), len(b)
	if n1 == 0 || n2 == 0 {
		return 0, math.NaN()
	}
	rankSumA, ties := rankSum(a, b)
	u = rankSumA - float64(n1*(n1+1))/2
	if n1 <= ExactMax && n2 <= ExactMax && ties == 0 {
		return u, exactP(n1, n2, u)
	}
	return u, normalP(n1, n2, u, ties)
}

// rankSum ranks a and b together (tied values get the mean of their
// ranks) and returns the sum of a's ranks and Σ(t³-t) over the groups of t
// tied values, which the variance of U needs.
func rankSum(a, b []float64) (sumA, ties float64) {
	type obs struct {
		v   float64
		inA bool
	}
	all := make([]obs, 0, len(a)+len(b))
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(x, y obs) int {
		switch {
		case x.v < y.v:
			return -1
		case x.v > y.v:
			return 1
		}
		return 0
	})
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		// Positions i..j-1 hold equal values: ranks i+1..j, mean (i+1+j)/2.
		rank := float64(i+1+j) / 2
		for k := i; k < j; k++ {
			if all[k].inA {
				sumA += rank
			}
		}
		if t := float64(j - i); t > 1 {
			ties += t*t*t - t
		}
		i = j
	}
	return sumA, ties
}

// exactP returns the two-sided p-value of U = u for samples of n1 and n2
// values without ties: twice the smaller tail probability, at most 1.
func exactP(n1, n2 int, u float64) float64 {
	counts := uCounts(n1, n2)
	var total float64
	for _, c := range counts {
		total += c
	}
	// U is a whole number here (no ties), and its distribution is
	// symmetric about n1*n2/2, so the upper tail P(U >= u) is the lower
	// tail at n1*n2 - u.
	k := int(math.Round(u))
	lower := tail(counts, k)
	upper := tail(counts, n1*n2-k)
	return math.Min(1, 2*math.Min(lower, upper)/total)
}

// tail returns counts[0] + ... + counts[k].
func tail(counts []float64, k int) float64 {
	var s float64
	for i := 0; i <= k && i < len(counts); i++ {
		s += counts[i]
	}
	return s
}

// uCounts returns, for u = 0..n1*n2, how many of the C(n1+n2, n1)
// equally likely orderings of the two samples give U = u.
//
// Look at the largest of all n1+n2 values. If it is from the first sample
// it exceeds all n2 values of the second, adding n2 to U, and the rest is
// an ordering of n1-1 and n2 values; if it is from the second sample it
// adds nothing and leaves n1 and n2-1. So
//
//	f(i, j, u) = f(i-1, j, u-j) + f(i, j-1, u),   f(0, j, 0) = f(i, 0, 0) = 1.
//
// The counts are at most C(40, 20) ≈ 1.4e11 for samples of ExactMax, so
// float64 holds them exactly.
func uCounts(n1, n2 int) []float64 {
	// f[i][j] is the distribution for sizes i and j; row i is built from
	// row i-1 and the row itself.
	prev := make([][]float64, n2+1)
	for j := range prev {
		prev[j] = []float64{1} // i = 0: U is always 0
	}
	for i := 1; i <= n1; i++ {
		cur := make([][]float64, n2+1)
		cur[0] = []float64{1} // j = 0: U is always 0
		for j := 1; j <= n2; j++ {
			d := make([]float64, i*j+1)
			for u, c := range prev[j] { // largest from the first sample
				d[u+j] += c
			}
			for u, c := range cur[j-1] { // largest from the second
				d[u] += c
			}
			cur[j] = d
		}
		prev = cur
	}
	return prev[n2]
}

// normalP returns the two-sided p-value of U = u from the normal
// approximation: mean n1*n2/2, variance n1*n2/12 * ((n+1) - Σ(t³-t)/(n(n-1)))
// where n = n1+n2 and ties is Σ(t³-t), and |U - mean| reduced by 1/2 for
// continuity.
func normalP(n1, n2 int, u, ties float64) float64 {
	f1, f2 := float64(n1), float64(n2)
	n := f1 + f2
	mean := f1 * f2 / 2
	variance := f1 * f2 / 12 * ((n + 1) - ties/(n*(n-1)))
	if variance <= 0 {
		return 1 // every value equal: nothing tells the samples apart
	}
	z := math.Max(0, math.Abs(u-mean)-0.5) / math.Sqrt(variance)
	return math.Min(1, math.Erfc(z/math.Sqrt2))
}

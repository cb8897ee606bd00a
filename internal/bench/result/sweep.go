package result

// Saturated reports whether a step that aimed at target records a second
// and achieved achieved is saturated: achieved fell more than 5% below
// target. A target of 0 (closed loop: send as fast as possible) is never
// saturated.
func Saturated(target, achieved float64) bool {
	// achieved < 0.95·target, as achieved·20 < target·19: exact for rates
	// in whole records a second, so a step at exactly 95% can never be
	// called saturated by a rounding error (0.95 has no exact binary
	// form).
	return target > 0 && achieved*20 < target*19
}

// Finish completes a sweep whose steps ran: it fills each step's achieved
// rate and p99s from its Result where they are unset, marks the saturated
// steps, and sets LastSustained and LastSustainedP99 from the last step
// before the first one that was saturated or whose run was not valid (a
// consumer that fell behind is saturation too, just further down the
// pipeline). It sets Schema and Kind if they are unset.
func Finish(s *Sweep) {
	if s.Schema == 0 {
		s.Schema = SchemaVersion
	}
	if s.Kind == "" {
		s.Kind = KindKafkaSweep
	}
	s.LastSustained, s.LastSustainedP99 = 0, 0
	sustained := true
	for i := range s.Steps {
		st := &s.Steps[i]
		if r := st.Result; r != nil {
			if st.Achieved == 0 {
				st.Achieved = r.PublishRate
			}
			if st.P99 == 0 {
				st.P99 = r.PublishLatency.P99
			}
			if st.E2EP99 == 0 {
				st.E2EP99 = r.E2ELatency.P99
			}
			if st.Target == 0 {
				st.Target = r.TargetRate
			}
		}
		st.Saturated = Saturated(st.Target, st.Achieved)
		if st.Saturated || (st.Result != nil && !st.Result.Valid) {
			sustained = false
		}
		if sustained {
			s.LastSustained, s.LastSustainedP99 = st.Achieved, st.P99
		}
	}
}

package drainbench

import (
	"math"
	"strconv"
	"strings"
)

// ParseMetrics reads the Prometheus text format and returns, for each
// metric name whose name starts with one of prefixes, the sum of its
// samples over all label sets (histogram buckets and summary quantiles are
// left out; _sum and _count are kept).
func ParseMetrics(text string, prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasSuffix(name, "_bucket") || !hasAnyPrefix(name, prefixes) {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			// Label values may hold spaces and braces inside quotes.
			end := closingBrace(rest)
			if end < 0 || strings.Contains(rest[:end], `quantile="`) {
				// Unparseable, or a summary's quantile (not summable).
				continue
			}
			rest = rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		out[name] += v
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// closingBrace is the index of the '}' that ends a label set starting at
// s[0] == '{', skipping quoted values.
func closingBrace(s string) int {
	quoted, escaped := false, false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case c == '\\' && quoted:
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == '}' && !quoted:
			return i
		}
	}
	return -1
}

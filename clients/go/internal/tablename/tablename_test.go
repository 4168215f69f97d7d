package tablename

import (
	"strings"
	"testing"
)

func TestTheNameRule(t *testing.T) {
	for _, good := range []string{"sin128", "llama3.1-8b", "a_b", "..x"[1:], strings.Repeat("x", 64), ".a", "a."} {
		if err := Check(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a..b", "a/b", "sin 128", "x\x00", strings.Repeat("x", 65), "é"} {
		if Check(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Package tablename holds the one rule for table names (docs/shm-format.md, "Files"), shared by the
// protocol client (RESOLVE) and the shared-memory reader.
package tablename

import "fmt"

// MaxLen is the longest table name: 64 bytes.
const MaxLen = 64

// Check says why name is not a table name (nil when it is): 1 to 64 characters of [A-Za-z0-9_.-],
// no "..", not "." alone, so that a name can never reach outside the shm directory.
func Check(name string) error {
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
		if !ok {
			return fmt.Errorf("%q must be 1..%d characters of [A-Za-z0-9_.-]", name, MaxLen)
		}
		if c == '.' && i+1 < len(name) && name[i+1] == '.' {
			return fmt.Errorf("%q must not contain '/' or '..'", name)
		}
	}
	if name == "." {
		return fmt.Errorf("%q must not contain '/' or '..'", name)
	}
	if len(name) < 1 || len(name) > MaxLen {
		return fmt.Errorf("%q must be 1..%d characters of [A-Za-z0-9_.-]", name, MaxLen)
	}
	return nil
}

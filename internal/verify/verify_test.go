package verify

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChecker(t *testing.T) {
	want := NewHash()
	for _, m := range []string{"a", "bc", "def"} {
		want.Add([]byte(m))
	}
	c := NewChecker[string](3)
	c.Deliver("s", 1, []byte("a"))
	c.Deliver("s", 2, []byte("bc"))
	c.Deliver("s", 2, []byte("bc")) // duplicate
	c.Deliver("s", 3, []byte("def"))
	<-c.Done()
	err := c.Check("s", 1, 3, want.Sum())
	require.ErrorContains(t, err, "1 duplicates")

	c = NewChecker[string](3)
	c.Deliver("s", 1, []byte("a"))
	c.Deliver("s", 2, []byte("bc"))
	c.Deliver("s", 3, []byte("dex"))
	require.ErrorContains(t, c.Check("s", 1, 3, want.Sum()), "hash mismatch")
	require.ErrorContains(t, c.Check("t", 1, 3, want.Sum()), "nothing delivered")

	c = NewChecker[string](3)
	c.Deliver("s", 1, []byte("a"))
	c.Deliver("s", 2, []byte("bc"))
	c.Deliver("s", 3, []byte("def"))
	require.NoError(t, c.Check("s", 1, 3, want.Sum()))

	// Boundaries count: "ab"+"c" is not "a"+"bc".
	h1, h2 := NewHash(), NewHash()
	h1.Add([]byte("ab"))
	h1.Add([]byte("c"))
	h2.Add([]byte("a"))
	h2.Add([]byte("bc"))
	require.NotEqual(t, h1.Sum(), h2.Sum())
}

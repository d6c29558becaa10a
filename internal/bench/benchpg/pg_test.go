package benchpg

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseLSN(t *testing.T) {
	t.Parallel()
	n, err := ParseLSN("16/B374D848")
	require.NoError(t, err)
	require.Equal(t, uint64(0x16)<<32|0xB374D848, n)
	for _, bad := range []string{"", "16", "x/1", "1/x", "1/123456789"} {
		_, err := ParseLSN(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestNewPGServer(t *testing.T) {
	t.Parallel()
	s, err := NewServer("postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "receipts_bench")
	require.NoError(t, err)
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/receipts_bench?sslmode=disable", s.benchURL)
	_, err = NewServer("postgres://127.0.0.1/postgres", "receipts")
	require.ErrorContains(t, err, "must contain \"bench\"", "never drops a database that is not the bench's")
	_, err = NewServer("host=127.0.0.1 dbname=x", "receipts_bench")
	require.Error(t, err)
}

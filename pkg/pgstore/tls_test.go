package pgstore_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/tlstest"
)

// --pg-url passes sslmode and sslrootcert to pgx as they are: against a
// Postgres that accepts only TLS (hostssl trust, hostnossl reject), the
// store works over TLS with sslmode=require and with verify-full and the
// CA, and is refused without TLS or with a CA that did not sign the
// server's certificate.
func TestPostgresTLS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("creates and starts its own Postgres cluster (initdb and start: 3 s idle, over 10 s on a loaded 2-core machine); run without -short")
	}
	pki := tlstest.New(t)
	srv := pgtest.StartServer(t, pgtest.ServerOptions{
		CertFile: pki.ServerCertFile, KeyFile: pki.ServerKeyFile,
		HBA: "local all all trust\n" +
			"hostssl all all 127.0.0.1/32 trust\n" +
			"hostnossl all all 127.0.0.1/32 reject\n",
	})
	ctx := context.Background()
	open := func(query string) (*pgstore.Store, error) {
		st, err := pgstore.Open(ctx, pgstore.Config{URL: srv.URL("postgres", query), MaxConns: 2})
		require.NoError(t, err, "Open is lazy")
		t.Cleanup(st.Close)
		return st, st.Ping(ctx)
	}
	usesTLS := func(st *pgstore.Store) bool {
		var ssl bool
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl))
		return ssl
	}

	store, err := open("sslmode=require")
	require.NoError(t, err)
	require.True(t, usesTLS(store))
	// The store's whole path works over it: migrations, a write, a read.
	_, err = store.Migrate(ctx)
	require.NoError(t, err)
	_, err = store.Pool().Exec(ctx, `INSERT INTO read_receipts (user_id, channel_id, read_seq, read_message_id) VALUES ('alice', 'c1', 7, 'm7')`)
	require.NoError(t, err)
	var seq int64
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT read_seq FROM read_receipts WHERE user_id = 'alice'`).Scan(&seq))
	require.Equal(t, int64(7), seq)

	store, err = open("sslmode=verify-full&sslrootcert=" + url.QueryEscape(pki.CAFile))
	require.NoError(t, err, "the server's certificate names 127.0.0.1 and is signed by the CA")
	require.True(t, usesTLS(store))

	_, err = open("sslmode=disable")
	require.ErrorContains(t, err, "no encryption", "pg_hba rejects plaintext")
	require.Equal(t, errclass.Permanent, pgstore.Classify(err), "%v", err)

	other := tlstest.New(t)
	_, err = open("sslmode=verify-full&sslrootcert=" + url.QueryEscape(other.CAFile))
	require.ErrorContains(t, err, "certificate signed by unknown authority")
}

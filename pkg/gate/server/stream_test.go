package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// deadlineRecorder records the write deadlines set through an
// http.ResponseController, and fails writes once told to.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
	stuck     bool // the client stopped reading: writes time out
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

func (d *deadlineRecorder) Write(b []byte) (int, error) {
	if d.stuck {
		return 0, errors.New("i/o timeout")
	}
	return d.ResponseRecorder.Write(b)
}

// TestStreamWriterBoundsEachWrite: a stream's writes have a deadline, set
// before each write and cleared after its flush (an idle stream is never
// cut), and a write that fails ends the stream, counted once.
func TestStreamWriterBoundsEachWrite(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{WatchWriteTimeout: time.Second}, m: newMetrics(prometheus.NewRegistry())}
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	sw := s.deadlineWriter(rec)
	require.Equal(t, []time.Time{{}}, rec.deadlines, "the server's write timeout is lifted at once")

	before := time.Now()
	_, err := sw.Write([]byte("event"))
	require.NoError(t, err)
	require.NoError(t, sw.flush())
	require.Len(t, rec.deadlines, 4)
	for _, d := range rec.deadlines[1:3] {
		require.WithinDuration(t, before.Add(time.Second), d, 500*time.Millisecond, "write and flush are bounded")
	}
	require.True(t, rec.deadlines[3].IsZero(), "cleared after the flush: idle is not slow")
	require.Equal(t, "event", rec.Body.String())

	rec.stuck = true
	_, err = sw.Write([]byte("x"))
	require.Error(t, err)
	_, err = sw.Write([]byte("y"))
	require.Error(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(s.m.watchDropped), "one stream dropped")

	// http.Flusher for connect, and Unwrap for the controller.
	var _ http.Flusher = sw
	require.Equal(t, http.ResponseWriter(rec), sw.Unwrap())
}

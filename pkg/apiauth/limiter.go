package apiauth

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiterTable holds one token bucket per client, bounded: entries idle for
// longer than idle are dropped (an idle bucket has refilled, so a new one
// is the same), and when the table is full the least recently seen client
// is dropped too. A dropped busy client starts again with a full burst:
// with the bound well above the clients a deployment has, that only
// happens to a caller spraying source addresses.
type limiterTable struct {
	limit   rate.Limit
	burst   int
	max     int
	idle    time.Duration
	evicted func()

	mu        sync.Mutex
	clients   map[string]*clientLimit
	lastSweep time.Time
}

type clientLimit struct {
	lim      *rate.Limiter
	lastSeen time.Time
}

func newLimiterTable(perSecond float64, burst, maxClients int, idle time.Duration, evicted func()) *limiterTable {
	return &limiterTable{
		limit: rate.Limit(perSecond), burst: burst, max: maxClients, idle: idle, evicted: evicted,
		clients: make(map[string]*clientLimit), lastSweep: time.Now(),
	}
}

// take spends n events of client's budget at now. It returns 0 when they
// fit, else how long until they would, spending nothing; an n that can
// never fit (above the burst) is an error.
func (t *limiterTable) take(client string, n int, now time.Time) (time.Duration, error) {
	if n > t.burst {
		return 0, fmt.Errorf("a call of %d events exceeds the burst of %d the rate limit allows", n, t.burst)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.lastSweep) >= t.idle {
		t.sweepLocked(now)
	}
	c := t.clients[client]
	if c == nil {
		if len(t.clients) >= t.max {
			t.sweepLocked(now)
			if len(t.clients) >= t.max {
				t.evictOldestLocked()
			}
		}
		c = &clientLimit{lim: rate.NewLimiter(t.limit, t.burst)}
		t.clients[client] = c
	}
	c.lastSeen = now
	r := c.lim.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, nil
	}
	return 0, nil
}

// size is the number of clients in the table.
func (t *limiterTable) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients)
}

func (t *limiterTable) sweepLocked(now time.Time) {
	t.lastSweep = now
	for k, c := range t.clients {
		if now.Sub(c.lastSeen) >= t.idle {
			delete(t.clients, k)
			t.evicted()
		}
	}
}

func (t *limiterTable) evictOldestLocked() {
	var (
		oldest string
		seen   time.Time
	)
	for k, c := range t.clients {
		if oldest == "" || c.lastSeen.Before(seen) {
			oldest, seen = k, c.lastSeen
		}
	}
	delete(t.clients, oldest)
	t.evicted()
}

package persister

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// table names one kind of row a window writes; a record contributes to a
// set of them (a join, for instance, to members and cursors).
type table uint8

const (
	tableCursors table = 1 << iota
	tableHeads
	tableMembers
	tableMentions
	tableSettings
)

func (t table) String() string {
	switch t {
	case tableCursors:
		return "read_receipts"
	case tableHeads:
		return "channel_heads"
	case tableMembers:
		return "channel_members"
	case tableMentions:
		return "mentions"
	case tableSettings:
		return "user_settings"
	}
	return "unknown"
}

// window is the unit of one write: the records of many polls, decoded and
// deduplicated per table key as they arrive (cursors and heads keep their
// max, membership the greater register, mentions the union kept to the
// newest cap+1), so that a key changed many times in the window costs one
// row per table. Its offsets are committed only after every table's rows
// are written.
type window struct {
	mentionCap int
	// recs are the window's records in poll order; keys[i] is the record
	// key of recs[i] ("" for an undecodable one) and tables[i] the tables
	// it contributes to.
	recs   []*kgo.Record
	keys   []string
	tables []table

	rows     map[receipt.Key]receipt.State
	heads    map[string]channel.Head
	members  map[receipt.Key]channel.Membership
	mentions map[receipt.Key][]int64
	// erasures are the window's erasure tombstones, applied before its rows.
	erasures tombstone.Set
	settings map[string]privacy.Settings

	undecodable []deadLetter
	// sorted caches sortedRows until the window changes: the poller sorts
	// a window before it waits to hand it over, so the writer does not.
	sorted *sortedTables
	// last holds, per partition, the window's last record: what is
	// committed once the window is written.
	last map[topicPartition]*kgo.Record
}

func newWindow(capacity, mentionCap int) *window {
	return &window{
		mentionCap: mentionCap,
		recs:       make([]*kgo.Record, 0, capacity),
		keys:       make([]string, 0, capacity),
		tables:     make([]table, 0, capacity),
		rows:       make(map[receipt.Key]receipt.State, capacity/4),
		heads:      map[string]channel.Head{},
		members:    map[receipt.Key]channel.Membership{},
		mentions:   map[receipt.Key][]int64{},
		erasures:   tombstone.Set{},
		settings:   map[string]privacy.Settings{},
		last:       map[topicPartition]*kgo.Record{},
	}
}

// add decodes recs into the window. An undecodable record is kept for the
// dead-letter topic with the reason; its offset is committed with the rest
// once it is acked there.
func (w *window) add(recs []*kgo.Record) {
	for _, r := range recs {
		tp := topicPartition{r.Topic, r.Partition}
		if cur := w.last[tp]; cur == nil || cur.Offset < r.Offset {
			w.last[tp] = r
		}
		d, err := event.DecodeRecord(r)
		w.recs = append(w.recs, r)
		if err != nil {
			w.keys = append(w.keys, "")
			w.tables = append(w.tables, 0)
			w.undecodable = append(w.undecodable, deadLetter{src: r, reason: err.Error()})
			continue
		}
		w.keys = append(w.keys, d.RecordKey())
		if d.Erasure != nil {
			w.erasures.Add(*d.Erasure)
		}
		w.tables = append(w.tables, w.merge(d))
	}
}

// merge folds one decoded event into the window's rows and returns the
// tables it contributes to.
func (w *window) merge(d event.Decoded) table {
	w.sorted = nil
	var t table
	if s := d.Receipt; s != nil {
		// Merging into the stored (or the zero) state applies the rules
		// of the merge to a lone record too (reading implies delivery),
		// so what Postgres ends with does not depend on how records
		// fell into windows.
		w.rows[s.Key], _ = receipt.Merge(w.rows[s.Key], *s)
		t |= tableCursors
	}
	if h := d.Channel; h != nil {
		w.heads[h.Channel], _ = channel.MergeHead(w.heads[h.Channel], *h)
		t |= tableHeads
	}
	if m := d.Membership; m != nil {
		w.members[m.Key], _ = channel.MergeMembership(w.members[m.Key], *m)
		t |= tableMembers
	}
	if st := d.Settings; st != nil {
		cur, ok := w.settings[st.User]
		if !ok {
			cur.VersionMs = -1 // below every version, so the first one wins
		}
		w.settings[st.User], _ = privacy.Merge(cur, *st)
		t |= tableSettings
	}
	if len(d.Mentions) > 0 {
		w.mentions[d.Key] = channel.MergeMentions(w.mentions[d.Key], d.Mentions, w.mentionCap)
		t |= tableMentions
	}
	return t
}

// users returns the distinct users of the window's rows.
func (w *window) users() []string {
	seen := map[string]struct{}{}
	for k := range w.rows {
		seen[k.User] = struct{}{}
	}
	for k := range w.members {
		seen[k.User] = struct{}{}
	}
	for k := range w.mentions {
		seen[k.User] = struct{}{}
	}
	for u := range w.settings {
		seen[u] = struct{}{}
	}
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// dropErased takes out of the window every event of an erased user that
// predates the erasure (tombstone.Drops): the rows of the users in tombs
// are rebuilt from the window's records that survive. Erased users are
// rare, so only their records are decoded again. It returns how many
// events were dropped; those contribute to no table (never dead-lettered).
func (w *window) dropErased(tombs tombstone.Set) int {
	if len(tombs) == 0 {
		return 0
	}
	w.sorted = nil
	for k := range w.rows {
		if _, ok := tombs[k.User]; ok {
			delete(w.rows, k)
		}
	}
	for k := range w.members {
		if _, ok := tombs[k.User]; ok {
			delete(w.members, k)
		}
	}
	for k := range w.mentions {
		if _, ok := tombs[k.User]; ok {
			delete(w.mentions, k)
		}
	}
	for u := range w.settings {
		if _, ok := tombs[u]; ok {
			delete(w.settings, u)
		}
	}
	dropped := 0
	for i, key := range w.keys {
		user, isUser := recordUser(key)
		if !isUser || w.tables[i] == 0 {
			continue
		}
		if _, ok := tombs[user]; !ok {
			continue
		}
		d, err := event.DecodeRecord(w.recs[i])
		if err != nil {
			continue // decoded once already; cannot happen
		}
		if tombs.Drops(user, d.Generation, d.AcceptedAt()) {
			w.tables[i] = 0
			dropped++
			continue
		}
		w.merge(d)
	}
	return dropped
}

// ofUsers returns the rows of users in the window, for writing again: a
// window of its own, with no records, channel heads or offsets.
func (w *window) ofUsers(users tombstone.Set) *window {
	sub := newWindow(0, w.mentionCap)
	for k, r := range w.rows {
		if _, ok := users[k.User]; ok {
			sub.rows[k] = r
		}
	}
	for k, m := range w.members {
		if _, ok := users[k.User]; ok {
			sub.members[k] = m
		}
	}
	for k, m := range w.mentions {
		if _, ok := users[k.User]; ok {
			sub.mentions[k] = m
		}
	}
	for u, st := range w.settings {
		if _, ok := users[u]; ok {
			sub.settings[u] = st
		}
	}
	return sub
}

// recordUser is the user of a record key: "user:channel" or a user-wide
// event's "u::user"; a channel event's key has none.
func recordUser(key string) (string, bool) {
	if u, ok := strings.CutPrefix(key, event.UserKey("")); ok {
		return u, true
	}
	user, _, ok := strings.Cut(key, ":")
	return user, ok
}

// len is the number of records in the window.
func (w *window) len() int { return len(w.recs) }

// rowCount is the number of deduplicated rows of every table.
func (w *window) rowCount() int {
	n := len(w.rows) + len(w.heads) + len(w.members) + len(w.settings)
	for _, s := range w.mentions {
		n += len(s)
	}
	return n
}

// sortedTables are a window's rows of each table in key order.
type sortedTables struct {
	rows     []receipt.State
	heads    []channel.Head
	members  []channel.Membership
	mentions []channel.Mentions
}

// sort computes sortedRows ahead, off the writer: the poller calls it on a
// window it is about to wait to hand over, while the writer still writes
// the previous one (a 50,000-record window's sort is ~10 % of its write).
func (w *window) sort() {
	if w.sorted == nil {
		w.sorted = w.sortTables()
	}
}

// sortedRows returns each table's rows in key order.
func (w *window) sortedRows() ([]receipt.State, []channel.Head, []channel.Membership, []channel.Mentions) {
	w.sort()
	return w.sorted.rows, w.sorted.heads, w.sorted.members, w.sorted.mentions
}

func (w *window) sortTables() *sortedTables {
	rows := make([]receipt.State, 0, len(w.rows))
	for _, r := range w.rows {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, receipt.CompareStates)
	heads := make([]channel.Head, 0, len(w.heads))
	for _, h := range w.heads {
		heads = append(heads, h)
	}
	slices.SortFunc(heads, func(a, b channel.Head) int { return strings.Compare(a.Channel, b.Channel) })
	members := make([]channel.Membership, 0, len(w.members))
	for _, m := range w.members {
		members = append(members, m)
	}
	slices.SortFunc(members, pgstore.CompareMembers)
	mentions := make([]channel.Mentions, 0, len(w.mentions))
	for k, s := range w.mentions {
		mentions = append(mentions, channel.Mentions{Key: k, Seqs: s})
	}
	slices.SortFunc(mentions, func(a, b channel.Mentions) int { return a.Key.Compare(b.Key) })
	return &sortedTables{rows: rows, heads: heads, members: members, mentions: mentions}
}

// rejection is a row a table refused, by record key.
type rejection struct {
	table table
	key   string
}

// sourcesOf returns the records behind the rejected rows, in window
// order: every record of a rejected row's key that contributed to that
// table goes to the dead-letter topic (a record is sent once, even when
// several of its tables refused it).
func (w *window) sourcesOf(rejected map[rejection]error) []deadLetter {
	var out []deadLetter
	for i, k := range w.keys {
		if k == "" {
			continue
		}
		for t := tableCursors; t <= tableSettings; t <<= 1 {
			if w.tables[i]&t == 0 {
				continue
			}
			if err, ok := rejected[rejection{t, k}]; ok {
				out = append(out, deadLetter{src: w.recs[i], reason: t.String() + ": " + err.Error()})
				break
			}
		}
	}
	return out
}

// offsets are the records to commit for the window: each partition's last.
func (w *window) offsets() []*kgo.Record {
	out := make([]*kgo.Record, 0, len(w.last))
	for _, r := range w.last {
		out = append(out, r)
	}
	return out
}

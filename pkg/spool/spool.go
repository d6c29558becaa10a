package spool

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Defaults.
const (
	MaxBytesDefault         = 256 << 20
	SegmentBytesDefault     = 16 << 20
	MaxRecordBytesDefault   = 1 << 20
	ReadBatchRecordsDefault = 1000
	ReadBatchBytesDefault   = 4 << 20
)

// Errors callers route on.
var (
	// ErrFull: the append does not fit under Config.MaxBytes. Nothing of it
	// was written; retry after the spool drains (the gateway answers 503).
	ErrFull = errors.New("spool full")
	// ErrTooLarge: a record's key and value exceed Config.MaxRecordBytes,
	// or its headers MaxHeaders or MaxHeaderBytes.
	ErrTooLarge = errors.New("spool record too large")
	// ErrClosed: the spool is closed.
	ErrClosed = errors.New("spool closed")
	// ErrCorrupt: bytes on disk are not valid frames. Open repairs by
	// truncating; a reader meeting it in a running spool means the disk
	// changed under us, and reopening repairs it.
	ErrCorrupt = errors.New("spool data corrupt")
	// ErrLocked: another Spool holds the directory.
	ErrLocked = errors.New("spool directory locked")
	// ErrStaleCommit: another commit moved the read position since this
	// batch was read (two readers on one spool).
	ErrStaleCommit = errors.New("spool batch superseded")
)

// Config configures a Spool.
type Config struct {
	// Dir holds the segment files. Required; created if missing. One Spool
	// per directory (enforced with a lock file).
	Dir string
	// MaxBytes bounds the bytes of all segment files (frames and segment
	// headers; the 8 KiB checkpoint file is not counted). An Append fails
	// with ErrFull unless its frames and one segment header fit beside what
	// is stored and queued. Defaults to MaxBytesDefault (256 MiB).
	MaxBytes int64
	// SegmentBytes is the size at which a new segment file is started, so
	// drained space is returned to the file system a segment at a time.
	// A single Append larger than this gets a segment of its own. Keep it
	// well below MaxBytes: a partly drained segment frees nothing until it
	// is read to its end. Defaults to SegmentBytesDefault (16 MiB).
	SegmentBytes int64
	// MaxRecordBytes bounds len(Key)+len(Value) of one record; larger ones
	// fail with ErrTooLarge. At most 64 MiB. Defaults to
	// MaxRecordBytesDefault (1 MiB).
	MaxRecordBytes int
	// ReadBatchRecords bounds the records of one Next batch. Defaults to
	// ReadBatchRecordsDefault (1000).
	ReadBatchRecords int
	// ReadBatchBytes bounds the key and value bytes of one Next batch; a
	// batch always holds at least one record. Defaults to
	// ReadBatchBytesDefault (4 MiB).
	ReadBatchBytes int
}

func (c Config) withDefaults() (Config, error) {
	if c.MaxBytes == 0 {
		c.MaxBytes = MaxBytesDefault
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = SegmentBytesDefault
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = MaxRecordBytesDefault
	}
	if c.ReadBatchRecords == 0 {
		c.ReadBatchRecords = ReadBatchRecordsDefault
	}
	if c.ReadBatchBytes == 0 {
		c.ReadBatchBytes = ReadBatchBytesDefault
	}
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("spool: Dir is required"))
	}
	if c.SegmentBytes < 0 {
		errs = append(errs, fmt.Errorf("spool: SegmentBytes %d is negative", c.SegmentBytes))
	}
	if c.MaxRecordBytes < 0 || c.MaxRecordBytes > maxRecordBytesLimit {
		errs = append(errs, fmt.Errorf("spool: MaxRecordBytes %d is outside [1, %d]", c.MaxRecordBytes, maxRecordBytesLimit))
	}
	if min := headerSize + FrameOverhead + int64(c.MaxRecordBytes); c.MaxBytes < min {
		errs = append(errs, fmt.Errorf("spool: MaxBytes %d cannot hold one record of MaxRecordBytes %d (needs %d)", c.MaxBytes, c.MaxRecordBytes, min))
	}
	if c.ReadBatchRecords < 0 {
		errs = append(errs, fmt.Errorf("spool: ReadBatchRecords %d is negative", c.ReadBatchRecords))
	}
	if c.ReadBatchBytes < 0 {
		errs = append(errs, fmt.Errorf("spool: ReadBatchBytes %d is negative", c.ReadBatchBytes))
	}
	return c, errors.Join(errs...)
}

// Stats is a snapshot of the spool's size.
type Stats struct {
	// Bytes is the size of all segment files, the quantity MaxBytes bounds.
	// Drained bytes are given back a whole segment at a time, and all at
	// once when a reader catches up.
	Bytes int64
	// MaxBytes is the configured bound.
	MaxBytes int64
	// Records counts durable records not yet committed by a reader.
	Records int64
	// Segments counts segment files.
	Segments int
}

// Recovery reports what Open found on disk.
type Recovery struct {
	// Records and Segments are what is pending after recovery.
	Records  int64
	Segments int
	// DiscardedBytes could not be read as frames (a torn tail after a
	// crash: bytes of Appends that had not returned; or damage) and were
	// moved aside to the segments' .damaged files.
	DiscardedBytes int64
	// DamagedSegments counts segments that lost bytes.
	DamagedSegments int
	// CheckpointLost reports an unreadable checkpoint file: replay starts at
	// the oldest segment, so records may be sent twice but none is lost.
	CheckpointLost bool
}

// segment is one file; size counts only whole, fsynced frames.
type segment struct {
	id     uint64
	size   int64
	sealed bool // no more appends; size is final
}

type appendReq struct {
	buf     []byte
	records int
	done    chan error
}

// Spool is safe for concurrent use: any number of appenders, and one reader
// at a time (Next/commit and Drain serialise on a mutex).
type Spool struct {
	cfg      Config
	lock     *os.File
	ckpt     *checkpointFile
	recovery Recovery

	// Lock order: rmu, then wmu, then mu.

	rmu  sync.Mutex // the reader: cached file, commit
	rf   *os.File   // read handle of segment rfID
	rfID uint64
	rbr  *bufio.Reader

	wmu sync.Mutex // the active file: the writer's flush, and a commit retiring a drained active segment
	wf  *os.File   // active segment's file, nil when there is none
	cat []byte     // the writer's buffer to join a group's frames

	mu        sync.Mutex
	segs      []*segment // by id; the last is the active one unless sealed
	active    *segment   // nil until the next append creates one
	nextID    uint64
	read      position // oldest uncommitted record (or where it will be)
	used      int64    // bytes of segment files
	reserved  int64    // admitted appends not written yet
	pending   int64    // durable records not committed
	queue     []*appendReq
	forceRoll bool // the active file saw a failed write: never append to it again
	closed    bool
	dataCh    chan struct{} // closed and replaced when records become durable or on Close

	wake chan struct{} // cap 1: queue non-empty or closing
	done chan struct{} // writer goroutine exited
}

// Open opens or creates the spool in cfg.Dir, recovering from a crash:
// consumed segments are removed, and damaged bytes (a torn tail, a bad
// frame) are moved aside while every valid frame is kept (see Recovery).
func Open(cfg Config) (*Spool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("creating spool directory: %w", err)
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s := &Spool{
		cfg:    cfg,
		lock:   lock,
		dataCh: make(chan struct{}),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	if err := s.recover(); err != nil {
		if s.ckpt != nil {
			_ = s.ckpt.close()
		}
		_ = lock.Close()
		return nil, err
	}
	go s.run()
	return s, nil
}

const segmentSuffix = ".seg"

func segmentPath(dir string, id uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", id, segmentSuffix))
}

func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing spool directory: %w", err)
	}
	var ids []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), segmentSuffix)
		if !ok || len(name) != 20 || !e.Type().IsRegular() {
			continue
		}
		id, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// recover rebuilds the in-memory state from Dir. Every recovered segment is
// sealed: appends after a restart go to a fresh file rather than after a
// tail that was just repaired.
func (s *Spool) recover() error {
	dir := s.cfg.Dir
	ckpt, ck, ckOK, ckLost, err := openCheckpoint(dir)
	if err != nil {
		return err
	}
	s.ckpt = ckpt
	s.recovery.CheckpointLost = ckLost
	ids, err := listSegments(dir)
	if err != nil {
		return err
	}
	// New segment ids must exceed the checkpoint's even when its segment is
	// gone: a reused id would make the checkpoint skip the new records.
	maxID := ck.seg
	if len(ids) > 0 {
		maxID = max(maxID, ids[len(ids)-1])
	}
	s.nextID = maxID + 1
	s.read = position{seg: s.nextID, off: headerSize}

	changed := false
	for _, id := range ids {
		path := segmentPath(dir, id)
		if ckOK && id < ck.seg {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("removing consumed segment %d: %w", id, err)
			}
			changed = true
			continue
		}
		from := headerSize
		if ckOK && id == ck.seg {
			from = ck.off
		}
		res, err := recoverSegment(path, from)
		if err != nil {
			return fmt.Errorf("recovering segment %d: %w", id, err)
		}
		if res.discarded > 0 {
			s.recovery.DiscardedBytes += res.discarded
			s.recovery.DamagedSegments++
			changed = true
		}
		if res.rewritten && ckOK && id == ck.seg {
			// The frames moved: the checkpoint must name the first
			// pending one in the new file, or a later recovery could take
			// a moved pending frame for a consumed one.
			if err := s.ckpt.write(position{seg: id, off: res.start}); err != nil {
				return fmt.Errorf("moving the checkpoint into repaired segment %d: %w", id, err)
			}
		}
		if res.pending == 0 {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("removing drained segment %d: %w", id, err)
			}
			changed = true
			continue
		}
		if len(s.segs) == 0 {
			s.read = position{seg: id, off: res.start}
		}
		s.segs = append(s.segs, &segment{id: id, size: res.size, sealed: true})
		s.used += res.size
		s.pending += res.pending
	}
	if changed {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	s.recovery.Records = s.pending
	s.recovery.Segments = len(s.segs)
	return nil
}

type segmentRecovery struct {
	size      int64 // after repair
	discarded int64 // bytes moved aside to the .damaged file
	start     int64 // first frame boundary not consumed
	pending   int64 // frames from start on
	rewritten bool  // the file was rewritten (offsets moved)
}

// DamagedSuffix ends the file beside a segment that holds the bytes
// recovery could not read as frames (moved aside, never replayed).
const DamagedSuffix = ".damaged"

// recoverSegment scans one segment and counts the frames not consumed by a
// checkpoint at offset from. A damaged range (a torn tail after a crash, or
// damage inside the file) is moved aside to the segment's .damaged file and
// the segment is rewritten with every valid frame, those after the damage
// included. A from that is not a frame boundary (it always is, unless the
// disk lies) is rounded down, so a record is sent again rather than
// skipped.
func recoverSegment(path string, from int64) (segmentRecovery, error) {
	var res segmentRecovery
	data, err := os.ReadFile(path)
	if err != nil {
		return res, fmt.Errorf("reading: %w", err)
	}
	frames, damage := scanResync(data)
	res.start = -1
	var out []byte
	if len(damage) > 0 {
		out = make([]byte, 0, len(data))
		out = append(out, segmentMagic...)
	}
	newOff := headerSize
	for _, f := range frames {
		if f.end > from {
			if res.start < 0 {
				res.start = newOff
			}
			res.pending++
		}
		if out != nil {
			out = append(out, data[f.off:f.end]...)
		}
		newOff += f.end - f.off
	}
	res.size = newOff
	if res.start < 0 {
		res.start = res.size
	}
	if len(damage) == 0 {
		return res, nil
	}
	// The damaged bytes first, so that nothing is lost if the rewrite fails.
	df, err := os.OpenFile(path+DamagedSuffix, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return res, fmt.Errorf("opening the damaged-bytes file: %w", err)
	}
	for _, d := range damage {
		res.discarded += d.end - d.off
		if _, err := df.Write(data[d.off:d.end]); err != nil {
			_ = df.Close()
			return res, fmt.Errorf("moving damaged bytes aside: %w", err)
		}
	}
	if err := df.Sync(); err != nil {
		_ = df.Close()
		return res, fmt.Errorf("syncing the damaged-bytes file: %w", err)
	}
	if err := df.Close(); err != nil {
		return res, fmt.Errorf("closing the damaged-bytes file: %w", err)
	}
	tmp := path + ".tmp"
	if err := writeFileSync(tmp, out); err != nil {
		return res, fmt.Errorf("rewriting without its damage: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return res, fmt.Errorf("replacing with its repaired copy: %w", err)
	}
	res.rewritten = true
	return res, nil
}

// writeFileSync writes and fsyncs a new file.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Recovery reports what Open found and repaired.
func (s *Spool) Recovery() Recovery { return s.recovery }

// Stats returns a snapshot of the spool's size.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Bytes: s.used, MaxBytes: s.cfg.MaxBytes, Records: s.pending, Segments: len(s.segs)}
}

// Append writes records as one group and returns once they are fsynced, or
// with an error after which none of them must be treated as stored (some may
// still be replayed: at-least-once). Concurrent calls are written and
// fsynced together. It fails whole with ErrFull when the records do not fit
// under MaxBytes and with ErrTooLarge for an oversized record.
func (s *Spool) Append(records ...Record) error {
	if len(records) == 0 {
		return nil
	}
	size := 0
	for i, r := range records {
		n := recordBytes(r)
		if n > s.cfg.MaxRecordBytes {
			return fmt.Errorf("spooling record %d of %d bytes (max %d): %w", i, n, s.cfg.MaxRecordBytes, ErrTooLarge)
		}
		if err := checkHeaders(r.Headers); err != nil {
			return fmt.Errorf("spooling record %d: %w", i, err)
		}
		size += FrameSize(r)
	}
	// Encode before taking the lock so appenders use every core for it.
	buf := make([]byte, 0, size)
	for _, r := range records {
		buf = appendFrame(buf, r)
	}
	req := &appendReq{buf: buf, records: len(records), done: make(chan error, 1)}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	// Room for one segment header too, in case this group starts a segment:
	// with one group rolling at a time the files never exceed MaxBytes.
	if used := s.used + s.reserved; used+int64(size)+headerSize > s.cfg.MaxBytes {
		s.mu.Unlock()
		return fmt.Errorf("spooling %d records (%d bytes) with %d of %d bytes in use: %w", len(records), size, used, s.cfg.MaxBytes, ErrFull)
	}
	s.reserved += int64(size)
	s.queue = append(s.queue, req)
	s.mu.Unlock()

	select {
	case s.wake <- struct{}{}:
	default: // the writer is already due to look at the queue
	}
	return <-req.done
}

// run is the writer: it takes whatever appends queued up while the previous
// group was being fsynced and writes them as the next group.
func (s *Spool) run() {
	defer close(s.done)
	for {
		group, size, closed := s.takeGroup()
		if len(group) > 0 {
			s.flush(group, size)
			continue
		}
		if closed {
			return
		}
		<-s.wake
	}
}

// takeGroup dequeues appends up to about one segment of bytes.
func (s *Spool) takeGroup() (group []*appendReq, size int64, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(s.queue) && (n == 0 || size+int64(len(s.queue[n].buf)) <= s.cfg.SegmentBytes) {
		size += int64(len(s.queue[n].buf))
		n++
	}
	group = slices.Clone(s.queue[:n])
	clear(s.queue[:n])
	s.queue = s.queue[n:]
	if len(s.queue) == 0 {
		s.queue = nil // let the backing array go
	}
	return group, size, s.closed
}

func (s *Spool) flush(group []*appendReq, size int64) {
	records := 0
	for _, req := range group {
		records += req.records
	}
	err := s.writeGroup(group, size, records)
	if err != nil {
		err = fmt.Errorf("spooling group of %d records: %w", records, err)
	}
	for _, req := range group {
		req.done <- err
	}
}

// writeGroup writes and fsyncs one group at the end of the active segment,
// first starting a new segment when needed, and accounts for it.
//
// The accounting happens before wmu is released: a commit retiring a fully
// read active segment takes wmu and then compares the read position with
// the segment's size, so it must never see the group written but not yet
// counted, or it would remove records about to be acknowledged.
func (s *Spool) writeGroup(group []*appendReq, size int64, records int) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	roll := s.active == nil || s.forceRoll ||
		(s.active.size > headerSize && s.active.size+size > s.cfg.SegmentBytes)
	s.mu.Unlock()
	if roll {
		if err := s.roll(); err != nil {
			s.mu.Lock()
			s.reserved -= size
			s.mu.Unlock()
			return err
		}
	}
	buf := group[0].buf
	if len(group) > 1 {
		s.cat = s.cat[:0]
		for _, req := range group {
			s.cat = append(s.cat, req.buf...)
		}
		buf = s.cat
	}
	// Only the holder of wmu changes the active segment or its size.
	s.mu.Lock()
	a := s.active
	off := a.size
	s.mu.Unlock()
	_, err := s.wf.WriteAt(buf, off)
	if err == nil {
		err = s.wf.Sync()
	}
	if cap(s.cat) > 4*int(s.cfg.SegmentBytes) {
		s.cat = nil // one huge group must not pin its buffer forever
	}
	if err != nil {
		// After a failed write or fsync the file's cached pages cannot be
		// trusted (a later fsync may report success for lost data), so
		// this segment takes no more appends. Cutting the partial group is
		// best effort: the reader stops at the tracked size anyway, and
		// Open would cut or replay whatever is left.
		_ = s.wf.Truncate(off)
		s.mu.Lock()
		s.reserved -= size
		s.forceRoll = true
		s.mu.Unlock()
		return fmt.Errorf("writing segment %d at offset %d: %w", a.id, off, err)
	}
	s.mu.Lock()
	s.reserved -= size
	a.size += size
	s.used += size
	s.pending += int64(records)
	close(s.dataCh)
	s.dataCh = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// roll starts a new segment and seals the active one. Called with wmu held.
func (s *Spool) roll() error {
	s.mu.Lock()
	id := s.nextID
	s.nextID++
	s.mu.Unlock()
	f, err := createSegment(s.cfg.Dir, id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.active != nil {
		s.active.sealed = true
	}
	s.active = &segment{id: id, size: headerSize}
	s.segs = append(s.segs, s.active)
	s.used += headerSize
	s.forceRoll = false
	s.mu.Unlock()
	if s.wf != nil {
		_ = s.wf.Close() // fully fsynced by its last group
	}
	s.wf = f
	return nil
}

// createSegment creates a segment file with its header, durably: an append
// must never be acknowledged in a file whose directory entry could vanish.
func createSegment(dir string, id uint64) (*os.File, error) {
	path := segmentPath(dir, id)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating segment %d: %w", id, err)
	}
	_, err = f.Write([]byte(segmentMagic))
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("creating segment %d: %w", id, err)
	}
	return f, nil
}

// Close stops accepting appends, waits until every admitted append is
// written, and releases the directory. Pending records stay on disk for the
// next Open. Blocked Next calls return ErrClosed.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.dataCh)
	s.dataCh = make(chan struct{})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.done

	var errs []error
	s.rmu.Lock()
	if s.rf != nil {
		errs = append(errs, s.rf.Close())
		s.rf = nil
	}
	s.rmu.Unlock()
	s.wmu.Lock()
	if s.wf != nil {
		errs = append(errs, s.wf.Close())
		s.wf = nil
	}
	s.wmu.Unlock()
	errs = append(errs, s.ckpt.close(), unlockDir(s.lock))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing spool: %w", err)
	}
	return nil
}

package spool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// Next returns the oldest batch of records not yet committed, waiting until
// there is one, ctx is done, or the spool closes. The batch holds at most
// Config.ReadBatchRecords records and about Config.ReadBatchBytes bytes.
// Records stay in the spool until commit is called (after they are safely
// sent); until then every Next returns the same batch again, so a failed send
// is simply retried. Records appended meanwhile come after it. The returned
// records are the caller's to keep.
//
// One reader at a time: commit fails with ErrStaleCommit if another commit
// moved the position since this batch was read, and returns nil if this batch
// was already committed.
func (s *Spool) Next(ctx context.Context) (batch []Record, commit func() error, err error) {
	for {
		s.mu.Lock()
		closed, ch := s.closed, s.dataCh
		s.mu.Unlock()
		if closed {
			return nil, nil, ErrClosed
		}
		batch, commit, err := s.readBatch()
		if err != nil || len(batch) > 0 {
			return batch, commit, err
		}
		// ch was taken before reading, so a group made durable after the
		// read has already closed it and the loop reads again.
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-ch:
		}
	}
}

// Drain sends every pending record in order, batch by batch, committing each
// batch after send returns nil, until the spool is empty (records appended
// while draining are sent too). It returns how many records were sent and
// committed. When send fails, Drain stops and returns its error; the failed
// batch and everything after it stay in the spool for the next call.
func (s *Spool) Drain(ctx context.Context, send func([]Record) error) (int, error) {
	sent := 0
	for {
		if err := ctx.Err(); err != nil {
			return sent, err
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return sent, ErrClosed
		}
		batch, commit, err := s.readBatch()
		if err != nil {
			return sent, err
		}
		if len(batch) == 0 {
			return sent, nil
		}
		if err := send(batch); err != nil {
			return sent, fmt.Errorf("sending %d spooled records: %w", len(batch), err)
		}
		if err := commit(); err != nil {
			return sent, err
		}
		sent += len(batch)
	}
}

// locate returns the segment holding p, or p moved to the start of the next
// segment when p's segment is gone. Called with mu held.
func (s *Spool) locate(p position) (i int, q position, ok bool) {
	i, _ = slices.BinarySearchFunc(s.segs, p.seg, func(seg *segment, id uint64) int {
		switch {
		case seg.id < id:
			return -1
		case seg.id > id:
			return 1
		}
		return 0
	})
	if i == len(s.segs) {
		return 0, p, false
	}
	if s.segs[i].id != p.seg {
		p = position{seg: s.segs[i].id, off: headerSize}
	}
	return i, p, true
}

// readBatch reads without waiting; an empty batch means nothing is pending.
func (s *Spool) readBatch() ([]Record, func() error, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.mu.Lock()
	start := s.read
	s.mu.Unlock()

	var batch []Record
	pos, bytes := start, 0
	full := func() bool {
		return len(batch) >= s.cfg.ReadBatchRecords || (len(batch) > 0 && bytes >= s.cfg.ReadBatchBytes)
	}
	for !full() {
		s.mu.Lock()
		i, p, ok := s.locate(pos)
		var seg segment
		var nextID uint64
		hasNext := ok && i+1 < len(s.segs)
		if ok {
			seg = *s.segs[i]
		}
		if hasNext {
			nextID = s.segs[i+1].id
		}
		s.mu.Unlock()
		if !ok {
			break
		}
		pos = p
		if pos.off >= seg.size {
			// A segment is sealed before its successor gets frames, so
			// moving on only from a sealed one keeps the order.
			if seg.sealed && hasNext {
				pos = position{seg: nextID, off: headerSize}
				continue
			}
			break
		}
		f, err := s.readFile(seg.id)
		if err != nil {
			return nil, nil, err
		}
		fr := newFrameReader(s.readBuffer(), f, pos.off, seg.size)
		for !full() {
			rec, err := fr.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, nil, fmt.Errorf("reading spool segment %d: %w", seg.id, err)
			}
			batch = append(batch, rec)
			bytes += recordBytes(rec)
		}
		pos.off = fr.off
	}
	if len(batch) == 0 {
		return nil, nil, nil
	}
	end, n := pos, int64(len(batch))
	return batch, func() error { return s.commit(start, end, n) }, nil
}

// readBuffer returns the reader's buffer; one reader at a time (rmu), so
// one buffer serves every batch.
func (s *Spool) readBuffer() *bufio.Reader {
	if s.rbr == nil {
		s.rbr = bufio.NewReaderSize(nil, 64<<10)
	}
	return s.rbr
}

// readFile returns a read handle on segment id, reusing the last one.
// Called with rmu held.
func (s *Spool) readFile(id uint64) (*os.File, error) {
	if s.rf != nil && s.rfID == id {
		return s.rf, nil
	}
	if s.rf != nil {
		_ = s.rf.Close()
		s.rf = nil
	}
	f, err := os.Open(segmentPath(s.cfg.Dir, id))
	if err != nil {
		return nil, fmt.Errorf("opening spool segment %d: %w", id, err)
	}
	s.rf, s.rfID = f, id
	return f, nil
}

// commit records durably that everything before end was sent, then gives
// back the space of segments read to their end.
func (s *Spool) commit(start, end position, n int64) error {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.mu.Lock()
	closed, cur := s.closed, s.read
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if !cur.less(end) {
		return nil // committed already
	}
	if cur != start {
		return ErrStaleCommit
	}
	// The checkpoint goes first: once segments are removed, only it says
	// where reading resumes after a crash.
	if err := s.ckpt.write(end); err != nil {
		return fmt.Errorf("committing %d spooled records: %w", n, err)
	}
	s.mu.Lock()
	s.read = end
	s.pending -= n
	s.mu.Unlock()

	s.removeDrained()
	s.retireDrainedActive()
	return nil
}

// removeDrained removes sealed segments the reader has passed. A segment
// whose removal fails stays listed (and counted) and is tried again at the
// next commit; Open removes it too. Called with rmu held.
func (s *Spool) removeDrained() {
	s.mu.Lock()
	var drained []uint64
	for _, seg := range s.segs {
		if !seg.sealed || !(seg.id < s.read.seg || (seg.id == s.read.seg && s.read.off >= seg.size)) {
			break
		}
		drained = append(drained, seg.id)
	}
	s.mu.Unlock()
	for _, id := range drained {
		if s.rf != nil && s.rfID == id {
			_ = s.rf.Close()
			s.rf = nil
		}
		if err := os.Remove(segmentPath(s.cfg.Dir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return
		}
		s.mu.Lock()
		s.segs = slices.DeleteFunc(s.segs, func(seg *segment) bool {
			if seg.id == id {
				s.used -= seg.size
				return true
			}
			return false
		})
		s.mu.Unlock()
	}
}

// retireDrainedActive removes the active segment once the reader has
// committed all of it, so a caught-up spool holds no bytes at all (even when
// MaxBytes is smaller than SegmentBytes). The next append starts a new
// segment with a larger id, so the checkpoint still pointing into the
// removed one can never skip it. Called with rmu held.
func (s *Spool) retireDrainedActive() {
	s.wmu.Lock() // wait out a group being written to it
	defer s.wmu.Unlock()
	s.mu.Lock()
	a := s.active
	if a == nil || s.read.seg != a.id || s.read.off < a.size {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if s.rf != nil && s.rfID == a.id {
		_ = s.rf.Close()
		s.rf = nil
	}
	if err := os.Remove(segmentPath(s.cfg.Dir, a.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		// Keep appending to it; the next commit tries again.
		return
	}
	if s.wf != nil {
		_ = s.wf.Close()
		s.wf = nil
	}
	s.mu.Lock()
	s.segs = slices.DeleteFunc(s.segs, func(seg *segment) bool { return seg == a })
	s.used -= a.size
	s.active = nil
	s.mu.Unlock()
}

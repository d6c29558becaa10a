package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// The checkpoint is one small file with two slots, written alternately in
// place (as LMDB does with its meta pages): a torn write can damage only the
// slot being written, and the other still holds the previous checkpoint. That
// costs one fsync per commit, where write-temp-then-rename costs two (file and
// directory). The slots sit in different 4 KiB blocks so one torn block never
// spans both.
const (
	checkpointName  = "checkpoint"
	checkpointMagic = "ckp1"
	checkpointSlot  = 4096
	checkpointLen   = 4 + 8 + 8 + 8 + 4 // magic, seq, segment, offset, crc
)

// position addresses a frame boundary: a segment id and a byte offset in it.
type position struct {
	seg uint64
	off int64
}

func (p position) less(q position) bool {
	return p.seg < q.seg || (p.seg == q.seg && p.off < q.off)
}

type checkpointFile struct {
	f   *os.File
	seq uint64 // sequence of the newest valid slot
}

// openCheckpoint opens or creates the checkpoint in dir. ok reports whether a
// valid checkpoint was found; lost whether the file had bytes but no valid
// slot.
func openCheckpoint(dir string) (c *checkpointFile, pos position, ok, lost bool, err error) {
	path := filepath.Join(dir, checkpointName)
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, position{}, false, false, fmt.Errorf("opening checkpoint: %w", err)
	}
	if created {
		// The file's existence must survive a crash before a commit relies on it.
		if err := syncDir(dir); err != nil {
			_ = f.Close()
			return nil, position{}, false, false, err
		}
	}
	c = &checkpointFile{f: f}
	nonEmpty := false
	for slot := range 2 {
		var b [checkpointLen]byte
		n, err := f.ReadAt(b[:], int64(slot)*checkpointSlot)
		if err != nil && !errors.Is(err, io.EOF) {
			_ = f.Close()
			return nil, position{}, false, false, fmt.Errorf("reading checkpoint slot %d: %w", slot, err)
		}
		if n > 0 {
			nonEmpty = true
		}
		seq, p, valid := decodeCheckpoint(b[:n])
		if valid && (!ok || seq > c.seq) {
			c.seq, pos, ok = seq, p, true
		}
	}
	return c, pos, ok, nonEmpty && !ok, nil
}

func decodeCheckpoint(b []byte) (seq uint64, p position, ok bool) {
	if len(b) < checkpointLen || string(b[0:4]) != checkpointMagic {
		return 0, position{}, false
	}
	if crc32.Checksum(b[:checkpointLen-4], castagnoli) != binary.LittleEndian.Uint32(b[checkpointLen-4:]) {
		return 0, position{}, false
	}
	seq = binary.LittleEndian.Uint64(b[4:12])
	p.seg = binary.LittleEndian.Uint64(b[12:20])
	p.off = int64(binary.LittleEndian.Uint64(b[20:28]))
	return seq, p, true
}

// write stores p durably in the slot not holding the newest checkpoint.
func (c *checkpointFile) write(p position) error {
	seq := c.seq + 1
	b := make([]byte, 0, checkpointLen)
	b = append(b, checkpointMagic...)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = binary.LittleEndian.AppendUint64(b, p.seg)
	b = binary.LittleEndian.AppendUint64(b, uint64(p.off))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if _, err := c.f.WriteAt(b, int64(seq%2)*checkpointSlot); err != nil {
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("syncing checkpoint: %w", err)
	}
	c.seq = seq
	return nil
}

func (c *checkpointFile) close() error { return c.f.Close() }

// syncDir makes creations, renames and removals in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening spool directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing spool directory: %w", err)
	}
	return nil
}

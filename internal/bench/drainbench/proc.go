package drainbench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcStat is the CPU accounting of one process from /proc/<pid>/stat, in
// clock ticks.
type ProcStat struct {
	PID, PPID int
	Comm      string
	// UTime and STime are the process' own user and system time.
	UTime, STime uint64
	// CUTime and CSTime are those of its children that exited and were
	// waited for (for the postmaster: backends that ended).
	CUTime, CSTime uint64
}

// Ticks is the process' own CPU time.
func (s ProcStat) Ticks() uint64 { return s.UTime + s.STime }

// ChildTicks is the CPU time of its reaped children.
func (s ProcStat) ChildTicks() uint64 { return s.CUTime + s.CSTime }

// ParseProcStat parses the contents of /proc/<pid>/stat. The command name
// sits in parentheses and may itself hold spaces and parentheses, so the
// fields are counted from the last ')'.
func ParseProcStat(b []byte) (ProcStat, error) {
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return ProcStat{}, fmt.Errorf("parsing /proc stat %q: no (comm)", trunc(b))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return ProcStat{}, fmt.Errorf("parsing /proc stat pid: %w", err)
	}
	// After ")": field 3 (state) onwards; utime is field 14, so index 11.
	f := strings.Fields(string(b[closing+1:]))
	if len(f) < 15 {
		return ProcStat{}, fmt.Errorf("parsing /proc stat %q: %d fields after comm, want >= 15", trunc(b), len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return ProcStat{}, fmt.Errorf("parsing /proc stat ppid: %w", err)
	}
	var v [4]uint64
	for i := range v {
		if v[i], err = strconv.ParseUint(f[11+i], 10, 64); err != nil {
			// cutime and cstime are signed in the kernel's format; they are
			// never negative in practice.
			return ProcStat{}, fmt.Errorf("parsing /proc stat field %d: %w", 14+i, err)
		}
	}
	return ProcStat{PID: pid, PPID: ppid, Comm: string(b[open+1 : closing]), UTime: v[0], STime: v[1], CUTime: v[2], CSTime: v[3]}, nil
}

// ReadProcStat reads /proc/<pid>/stat.
func ReadProcStat(pid int) (ProcStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ProcStat{}, err
	}
	return ParseProcStat(b)
}

// ProcsByComm returns the stat of every process whose command name is
// comm. Processes that end while the directory is read are skipped.
func ProcsByComm(comm string) (map[int]ProcStat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]ProcStat{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		if st, err := ReadProcStat(pid); err == nil {
			out[pid] = st
		}
	}
	return out, nil
}

// MachineStat is the whole machine's CPU time from the "cpu" line of
// /proc/stat, in clock ticks summed over all CPUs.
type MachineStat struct {
	// Busy is user + nice + system + irq + softirq (guest time is already
	// inside user and nice).
	Busy uint64
	// Idle is idle + iowait.
	Idle uint64
	// Steal is time the hypervisor gave to other guests: neither ours nor
	// idle, a sign of a noisy host.
	Steal uint64
}

// Total is every tick accounted.
func (m MachineStat) Total() uint64 { return m.Busy + m.Idle + m.Steal }

// Sub is m − o, field by field.
func (m MachineStat) Sub(o MachineStat) MachineStat {
	return MachineStat{Busy: m.Busy - o.Busy, Idle: m.Idle - o.Idle, Steal: m.Steal - o.Steal}
}

// ParseMachineStat parses /proc/stat's aggregate "cpu" line.
func ParseMachineStat(b []byte) (MachineStat, error) {
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return MachineStat{}, fmt.Errorf("parsing /proc/stat: cpu line has %d fields, want >= 9", len(f))
		}
		var v [8]uint64
		for i := range v {
			var err error
			if v[i], err = strconv.ParseUint(f[1+i], 10, 64); err != nil {
				return MachineStat{}, fmt.Errorf("parsing /proc/stat cpu field %d: %w", i+1, err)
			}
		}
		user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
		return MachineStat{Busy: user + nice + system + irq + softirq, Idle: idle + iowait, Steal: steal}, nil
	}
	return MachineStat{}, fmt.Errorf("parsing /proc/stat: no aggregate cpu line")
}

// ReadMachineStat reads /proc/stat.
func ReadMachineStat() (MachineStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineStat{}, err
	}
	return ParseMachineStat(b)
}

// ClockTicks is the kernel's USER_HZ (getconf CLK_TCK), 100 when it cannot
// be asked (it is 100 on every Linux architecture Go supports).
func ClockTicks() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return float64(n)
		}
	}
	return 100
}

// LoadAvg is /proc/loadavg's first three fields.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func trunc(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

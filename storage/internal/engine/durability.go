package engine

import "fmt"

// Durability is what a commit, and so an answer given after it, survives.
type Durability string

const (
	// DurabilityPower fsyncs the WAL at every commit (synchronous=FULL):
	// a committed transaction survives a process crash, an OS crash and a
	// power loss. Group commit shares that fsync between every job queued
	// behind the previous commit.
	DurabilityPower Durability = "power"
	// DurabilityProcess fsyncs only at checkpoints (synchronous=NORMAL): a
	// committed transaction survives a process crash, but an OS crash or
	// power loss can roll back the newest commits (never corrupt the file).
	DurabilityProcess Durability = "process"
)

// Synchronous is the PRAGMA synchronous value of d in WAL mode.
func (d Durability) Synchronous() (string, error) {
	switch d {
	case DurabilityPower:
		return "FULL", nil
	case DurabilityProcess:
		return "NORMAL", nil
	}
	return "", fmt.Errorf("DURABILITY must be power or process, not %q", string(d))
}

// SynchronousCommit is PostgreSQL's synchronous_commit for d: on waits
// for the WAL's flush at every commit, off returns before it (a crash of
// the server, not of Tally, can lose the newest commits).
func (d Durability) SynchronousCommit() (string, error) {
	switch d {
	case DurabilityPower:
		return "on", nil
	case DurabilityProcess:
		return "off", nil
	}
	return "", fmt.Errorf("DURABILITY must be power or process, not %q", string(d))
}

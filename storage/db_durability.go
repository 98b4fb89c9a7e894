package storage

import "github.com/tally-analytics/tally/storage/internal/engine"

// Durability is what a commit, and so an answer given after it, survives
// (engine.Durability).
type Durability = engine.Durability

// The durabilities (docs/storage.md): DurabilityPower fsyncs the WAL at
// every commit, DurabilityProcess only at checkpoints.
const (
	DurabilityPower   = engine.DurabilityPower
	DurabilityProcess = engine.DurabilityProcess
)

// ParseDurability checks a DURABILITY setting.
func ParseDurability(s string) (Durability, error) {
	d := Durability(s)
	if _, err := d.Synchronous(); err != nil {
		return "", err
	}
	return d, nil
}

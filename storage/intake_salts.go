package storage

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"
)

// saltCache holds the cookieless salts of recent days.
type saltCache struct {
	mu    sync.Mutex
	salts map[string][]byte
}

// DailySalt returns the secret salt of day's UTC date, creating it on first
// use. Salts older than yesterday are deleted by the dedup pruning, after
// which cookieless ids of those days cannot be recomputed.
func (db *DB) DailySalt(ctx context.Context, day time.Time) ([]byte, error) {
	key := day.UTC().Format(dayLayout)
	db.salts.mu.Lock()
	s, ok := db.salts.salts[key]
	db.salts.mu.Unlock()
	if ok {
		return s, nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	var salt []byte
	err := db.writer.do(ctx, func(tx *writeTx) error {
		if _, err := tx.Exec(`INSERT INTO daily_salts(day, salt) VALUES (?, ?) ON CONFLICT DO NOTHING`, key, fresh); err != nil {
			return err
		}
		return tx.QueryRow(`SELECT salt FROM daily_salts WHERE day = ?`, key).Scan(&salt)
	})
	if err != nil {
		return nil, fmt.Errorf("daily salt: %w", err)
	}
	db.salts.mu.Lock()
	if db.salts.salts == nil || len(db.salts.salts) > 4 {
		db.salts.salts = map[string][]byte{}
	}
	db.salts.salts[key] = salt
	db.salts.mu.Unlock()
	return salt, nil
}

// Package backupcheck checks a backup copy of the database, for the tests
// of `tally backup` and of the server's backup endpoint: one definition of
// what a sound copy is.
package backupcheck

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tally-analytics/tally/storage"
)

// Copy opens the copy at path and reports what is wrong with it, or nil: it
// must pass integrity_check, hold every event of ids (and ids must not be
// empty: a check of nothing proves nothing), have audit entries, and keep
// the audit log append-only (its triggers refuse UPDATE and DELETE).
func Copy(path string, ids []string) error {
	cp, err := sql.Open("sqlite", storage.FileURI(path))
	if err != nil {
		return err
	}
	defer cp.Close()
	var ok string
	if err := cp.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("integrity_check of the copy: got %q (%v), want ok", ok, err)
	}
	have := map[string]bool{}
	rows, err := cp.Query(`SELECT id FROM events`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		have[id] = true
	}
	rows.Close()
	missing := 0
	for _, id := range ids {
		if !have[id] {
			missing++
		}
	}
	if missing > 0 || len(ids) == 0 {
		return fmt.Errorf("got %d of %d acknowledged events missing from the copy, want none missing (and some acknowledged)", missing, len(ids))
	}
	var audits int
	if err := cp.QueryRow(`SELECT COUNT(*) FROM audit_log`).Scan(&audits); err != nil || audits == 0 {
		return fmt.Errorf("got %d audit entries in the copy (%v), want the tenants' entries", audits, err)
	}
	var errs []error
	for _, stmt := range []string{`UPDATE audit_log SET action = 'x'`, `DELETE FROM audit_log`} {
		if _, err := cp.Exec(stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
			errs = append(errs, fmt.Errorf("%s in the copy: got %v, want the append-only trigger to refuse it", stmt, err))
		}
	}
	return errors.Join(errs...)
}

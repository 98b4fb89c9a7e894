package server

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
)

// backup writes a consistent copy of the database to the absolute path
// given, on the server's file system, while intake goes on (README "Backup
// and restore"); `tally backup` calls it. Body {path, force?,
// database_path?}: database_path, when given, must be this server's
// database file, so that a copy is never taken of another instance's.
// Answers 200 with the copy's size once it is in place; 409 backup_exists
// when path exists without force.
//
// POST /v1/backup (admin token only)
func (s *Server) backup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, err := s.requireAdminToken(r); err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	path, err := body.str("path", fault.InvalidBackup)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(path) {
		return fault.Errorf(fault.InvalidBackup, "path must be absolute: it is a file on the server's file system")
	}
	var force bool
	if body.has("force") && json.Unmarshal(body["force"], &force) != nil {
		return fault.Errorf(fault.InvalidBackup, "force must be true or false")
	}
	if body.has("database_path") {
		want, err := body.str("database_path", fault.InvalidBackup)
		if err != nil {
			return err
		}
		if !s.db.IsPath(want) {
			return fault.Errorf(fault.InvalidBackup, "this server's database is not database_path: the address reached serves another database")
		}
	}
	// A large database takes longer than the write timeout to copy; the
	// answer is small and written at once when the copy is done.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	stats, err := s.db.Backup(r.Context(), path, force)
	if err != nil {
		return err
	}
	s.log.Info("backup written", "path", stats.Path, "bytes", stats.Bytes, "steps", stats.Steps, "restarts", stats.Restarts, "duration_ms", stats.Duration.Milliseconds())
	writeJSON(w, http.StatusOK, backupBody{
		Path: stats.Path, Bytes: stats.Bytes, Pages: stats.Pages, Steps: stats.Steps,
		Restarts: stats.Restarts, DurationMS: stats.Duration.Milliseconds(),
	})
	return nil
}

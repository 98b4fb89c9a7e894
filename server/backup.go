package server

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// backup writes a consistent copy of the database while intake goes on
// (docs/storage.md#backup-and-restore), into a new file in the backups folder
// next to the database, and answers its path; `tally backup` then moves
// it where its user asked. The request names no path: an admin token must
// not let anyone write or replace files elsewhere on the server. Body {}
// or {database_path}: database_path, when given, must be this server's
// database file, so that a copy is never taken of another instance's.
//
// POST /v1/backup (admin token only)
func (s *Server) backup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, err := s.requireAdminToken(r); err != nil {
		return err
	}
	if err := s.db.CanBackup(); err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	for _, field := range []string{"path", "force"} {
		if body.has(field) {
			return fault.Errorf(fault.InvalidBackup, "%s is not taken: the server writes a backup only into the %q folder next to its database, and tally backup moves it where you ask", field, storage.BackupFolder)
		}
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
	stats, err := s.db.BackupIntoFolder(r.Context())
	if err != nil {
		return err
	}
	s.log.Info("backup written", "bytes", stats.Bytes, "steps", stats.Steps, "restarts", stats.Restarts, "duration_ms", stats.Duration.Milliseconds())
	writeJSON(w, http.StatusOK, backupBody{
		Path: stats.Path, Bytes: stats.Bytes, Pages: stats.Pages, Steps: stats.Steps,
		Restarts: stats.Restarts, DurationMS: stats.Duration.Milliseconds(),
	})
	return nil
}

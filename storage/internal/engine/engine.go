// Package engine is storage's database mechanism, apart from what the
// service stores (docs/architecture.md#the-engine): opening either backend
// (SQLite's data source names and pragmas, durability, the WAL checkpoint
// loop; PostgreSQL's URL checks, startup checks, driver and connection
// errors), the backends' SQL fragments and error classes (Dialect), the
// single writer with group commit and its pre-commit hook (Writer,
// PreLocker) and its health, the migration runner (migrations handed in
// as an fs.FS), coordination of instances on PostgreSQL (LISTEN/NOTIFY,
// leader and advisory locks), the chunked resumable conversion runner and
// the disk probe.
//
// It knows two backends, SQLite (modernc.org/sqlite) and PostgreSQL
// (pgx), and nothing of the product: no table of the service is named
// here. It imports only the standard library, database/sql, the two
// drivers and fault; a test holds it to that (shape_test.go). Only
// storage imports it, as Go's internal rule enforces.
package engine

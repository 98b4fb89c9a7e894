package storage

import (
	"database/sql"
	"path/filepath"
	"testing"
)

func benchInsert(b *testing.B, mode int) {
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "x.db")+"?_pragma=journal_mode(WAL)")
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.Exec(`CREATE TABLE s (id INTEGER PRIMARY KEY, a TEXT, b TEXT, c INTEGER, d INTEGER, e INTEGER, f TEXT, g TEXT)`)
	db.Exec(`CREATE INDEX s_a ON s(a, c)`)
	q := `INSERT INTO s(a, b, c, d, e, f, g) VALUES (?, ?, ?, ?, ?, ?, ?)`
	if mode > 0 {
		q += ` RETURNING id`
	}
	if mode == 3 {
		q = `SELECT ? || ?, ?, ?, ?, ?, ?`
	}
	tx, _ := db.Begin()
	st, _ := tx.Prepare(q)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var id int64
		switch mode {
		case 0:
			r, err := st.Exec("site", "anon", i, i, i, "x", "y")
			if err != nil {
				b.Fatal(err)
			}
			id, _ = r.LastInsertId()
		case 1:
			if err := st.QueryRow("site", "anon", i, i, i, "x", "y").Scan(&id); err != nil {
				b.Fatal(err)
			}
		case 2:
			if _, err := st.Exec("site", "anon", i, i, i, "x", "y"); err != nil {
				b.Fatal(err)
			}
		case 3:
			var s string
			if err := st.QueryRow("site", "anon", i, i, i, "x", "y").Scan(&s, &id, &id, &id, &id, &id); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	tx.Commit()
}

func BenchmarkZZ0ExecLastID(b *testing.B)     { benchInsert(b, 0) }
func BenchmarkZZ1QueryReturning(b *testing.B) { benchInsert(b, 1) }
func BenchmarkZZ2ExecReturning(b *testing.B)  { benchInsert(b, 2) }
func BenchmarkZZ3QuerySelect(b *testing.B)    { benchInsert(b, 3) }

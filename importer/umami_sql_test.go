package importer

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/tally-analytics/tally/internal/bombtest"
	"github.com/tally-analytics/tally/internal/dbtest"
)

// The Umami database tests run Debian's postgresql and mariadb-server as
// throw-away servers (internal/dbtest): PostgreSQL a database of the
// test's own on the test binary's shared cluster.

func startPostgres(t *testing.T) string { return dbtest.SharedDatabase(t, "") }

func startMariaDB(t *testing.T) string { return dbtest.StartMariaDB(t, "umami") }

// Umami's tables, only those read and only their columns that matter:
// PostgreSQL as in prisma/migrations/01_init/migration.sql (event_data's
// columns as renamed by 02_report_schema_session_data, visit_id of
// 05_add_visit_id, distinct_id of 10_add_distinct_id, hostname on
// website_event as later releases keep it), MySQL as in
// db/mysql/migrations of the same releases (uuids as varchar(36)).
var umamiSchema = map[bool][]string{
	false: {
		`CREATE TABLE "session" ("session_id" UUID PRIMARY KEY, "website_id" UUID NOT NULL, "browser" VARCHAR(20), "os" VARCHAR(20),
			"device" VARCHAR(20), "screen" VARCHAR(11), "language" VARCHAR(35), "country" CHAR(2), "city" VARCHAR(50),
			"distinct_id" VARCHAR(50), "created_at" TIMESTAMPTZ(6) DEFAULT CURRENT_TIMESTAMP)`,
		`CREATE TABLE "website_event" ("event_id" UUID PRIMARY KEY, "website_id" UUID NOT NULL, "session_id" UUID NOT NULL,
			"visit_id" UUID NOT NULL, "created_at" TIMESTAMPTZ(6) DEFAULT CURRENT_TIMESTAMP, "url_path" VARCHAR(500) NOT NULL,
			"url_query" VARCHAR(500), "referrer_path" VARCHAR(500), "referrer_query" VARCHAR(500), "referrer_domain" VARCHAR(500),
			"page_title" VARCHAR(500), "event_type" INTEGER NOT NULL DEFAULT 1, "event_name" VARCHAR(50), "hostname" VARCHAR(100))`,
		`CREATE TABLE "event_data" ("event_data_id" UUID PRIMARY KEY, "website_id" UUID NOT NULL, "website_event_id" UUID NOT NULL,
			"data_key" VARCHAR(500) NOT NULL, "string_value" VARCHAR(500), "number_value" DECIMAL(19,4), "date_value" TIMESTAMPTZ(6),
			"data_type" INTEGER NOT NULL, "created_at" TIMESTAMPTZ(6) DEFAULT CURRENT_TIMESTAMP)`,
	},
	true: {
		"CREATE TABLE `session` (`session_id` VARCHAR(36) PRIMARY KEY, `website_id` VARCHAR(36) NOT NULL, `browser` VARCHAR(20), `os` VARCHAR(20), " +
			"`device` VARCHAR(20), `screen` VARCHAR(11), `language` VARCHAR(35), `country` CHAR(2), `city` VARCHAR(50), " +
			"`distinct_id` VARCHAR(50), `created_at` TIMESTAMP(0) DEFAULT CURRENT_TIMESTAMP(0))",
		"CREATE TABLE `website_event` (`event_id` VARCHAR(36) PRIMARY KEY, `website_id` VARCHAR(36) NOT NULL, `session_id` VARCHAR(36) NOT NULL, " +
			"`visit_id` VARCHAR(36) NOT NULL, `created_at` TIMESTAMP(0) DEFAULT CURRENT_TIMESTAMP(0), `url_path` VARCHAR(500) NOT NULL, " +
			"`url_query` VARCHAR(500), `referrer_path` VARCHAR(500), `referrer_query` VARCHAR(500), `referrer_domain` VARCHAR(500), " +
			"`page_title` VARCHAR(500), `event_type` INTEGER UNSIGNED NOT NULL DEFAULT 1, `event_name` VARCHAR(50), `hostname` VARCHAR(100))",
		"CREATE TABLE `event_data` (`event_data_id` VARCHAR(36) PRIMARY KEY, `website_id` VARCHAR(36) NOT NULL, `website_event_id` VARCHAR(36) NOT NULL, " +
			"`data_key` VARCHAR(500) NOT NULL, `string_value` VARCHAR(500), `number_value` DECIMAL(19,4), `date_value` TIMESTAMP(0) NULL, " +
			"`data_type` INTEGER UNSIGNED NOT NULL, `created_at` TIMESTAMP(0) DEFAULT CURRENT_TIMESTAMP(0))",
	},
}

// fillUmami writes testdata/import/umami.csv's rows into Umami's tables
// (and an event of another website), with event_data for the custom
// event, and returns the rows the CSV reads as, that custom event given
// those properties.
func fillUmami(t *testing.T, conn string) []Row {
	t.Helper()
	u, err := openUmami(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer u.db.Close()
	for _, s := range umamiSchema[u.mysql] {
		if _, err := u.db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	f, err := os.Open("../testdata/import/umami.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, _, err := newCSVTable(f)
	if err != nil {
		t.Fatal(err)
	}
	var want []Row
	sessions := map[string]bool{}
	ins := func(q string, args ...any) {
		t.Helper()
		if u.mysql {
			q = mysqlMarks(q)
		}
		if _, err := u.db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	for tab.next() == nil {
		g := tab.get
		if !sessions[g("session_id")] {
			sessions[g("session_id")] = true
			ins(`INSERT INTO session (session_id, website_id, browser, os, device, country, city, distinct_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				g("session_id"), g("website_id"), null(g("browser")), null(g("os")), null(g("device")), null(g("country")), null(g("city")), null(g("distinct_id")))
		}
		ts, _ := umamiTime(g("created_at"))
		typ, _ := strconv.Atoi(g("event_type"))
		ins(`INSERT INTO website_event (event_id, website_id, session_id, visit_id, created_at, url_path, url_query, referrer_path, referrer_query, referrer_domain, event_type, event_name, hostname)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			g("event_id"), g("website_id"), g("session_id"), uuid.NewString(), ts, g("url_path"), null(g("url_query")), null(g("referrer_path")),
			null(g("referrer_query")), null(g("referrer_domain")), typ, null(g("event_name")), null(g("hostname")))
		var data map[string]any
		if typ == 2 {
			data = map[string]any{"plan": "pro", "amount": 49.5, "trial": true}
			for _, d := range []struct {
				key, s string
				n      any
				typ    int
			}{{"plan", "pro", nil, 1}, {"amount", "49.5", 49.5, 2}, {"trial", "true", nil, 3}} {
				ins(`INSERT INTO event_data (event_data_id, website_id, website_event_id, data_key, string_value, number_value, data_type) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
					uuid.NewString(), g("website_id"), g("event_id"), d.key, d.s, d.n, d.typ)
			}
		}
		row, ok, err := umamiRow(g, data)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			want = append(want, row)
		}
	}
	// Another website's event, which is not read.
	ins(`INSERT INTO website_event (event_id, website_id, session_id, visit_id, created_at, url_path, event_type) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), time.Date(2024, 3, 15, 10, 0, 0, 0, time.UTC), "/other", 1)
	return want
}

// mysqlMarks turns $n placeholders into MySQL's ?.
func mysqlMarks(q string) string {
	out := []byte{}
	for i := 0; i < len(q); i++ {
		if q[i] == '$' {
			out = append(out, '?')
			for i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
				i++
			}
			continue
		}
		out = append(out, q[i])
	}
	return string(out)
}

// Umami's rows read from its PostgreSQL and MySQL (MariaDB) tables, in
// pages, are the rows its CSV export gives, the custom event with its
// event_data; another website's events are not read.
func TestReadUmamiDatabase(t *testing.T) {
	defer func(n int) { umamiPage = n }(umamiPage)
	umamiPage = 2 // several pages, one of them ending inside a second
	for name, start := range map[string]func(*testing.T) string{"postgres": startPostgres, "mariadb": startMariaDB} {
		t.Run(name, func(t *testing.T) {
			conn := start(t)
			want := fillUmami(t, conn)
			var got []Row
			st, err := ReadUmamiDatabase(context.Background(), conn, "4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1", func(r Row) error {
				got = append(got, r)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if st.Rows != 6 || st.Skipped != 1 {
				t.Errorf("got %d rows and %d skipped, want 6 and 1", st.Rows, st.Skipped)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("got %s\nwant %s", g, w)
			}
			var props map[string]any
			for _, r := range got {
				if r.Type == "signup" {
					json.Unmarshal(r.Properties, &props)
				}
			}
			if !reflect.DeepEqual(props, map[string]any{"plan": "pro", "amount": 49.5, "trial": true}) {
				t.Errorf("got the custom event's properties %v, want its event_data", props)
			}
		})
	}
}

// The database hands over no value longer than umamiValueMax characters
// (cut in the query), and a page ends early once its values pass
// umamiPageBytes, the next going on after it: the same rows come out.
func TestReadUmamiDatabaseBounds(t *testing.T) {
	defer func(n int64) { umamiPageBytes = n }(umamiPageBytes)
	const website = "4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1"
	for name, start := range map[string]func(*testing.T) string{"postgres": startPostgres, "mariadb": startMariaDB} {
		t.Run(name, func(t *testing.T) {
			conn := start(t)
			want := fillUmami(t, conn)
			umamiPageBytes = 300 // a page of a row or two
			var got []Row
			if _, err := ReadUmamiDatabase(context.Background(), conn, website, func(r Row) error {
				got = append(got, r)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("pages cut by bytes: got %s\nwant %s", g, w)
			}
			umamiPageBytes = 8 << 20

			u, err := openUmami(conn)
			if err != nil {
				t.Fatal(err)
			}
			defer u.db.Close()
			widen, long := `ALTER TABLE website_event ALTER COLUMN url_path TYPE TEXT`, `UPDATE website_event SET url_path = REPEAT('x', 8388608) WHERE event_type = 2`
			if u.mysql {
				widen = `ALTER TABLE website_event MODIFY url_path LONGTEXT NOT NULL`
			}
			for _, q := range []string{widen, long} {
				if _, err := u.db.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			mem := bombtest.Measure(func() {
				_, err = ReadUmamiDatabase(context.Background(), conn, website, func(Row) error { return nil })
			})
			t.Logf("an 8 MiB url_path: %.1f MiB allocated; %v", float64(mem.Allocated)/(1<<20), err)
			if err == nil || !strings.Contains(err.Error(), "url_path: longer than 2000 characters") || len(err.Error()) > 300 {
				t.Errorf("got %.500v, want url_path refused in a short message", err)
			}
			if mem.Allocated > 4<<20 {
				t.Errorf("allocated %d KiB, want under 4 MiB (the value cut in the database)", mem.Allocated>>10)
			}
		})
	}
}

package storage

import (
	"reflect"
	"testing"
)

// maxDBFields bounds the fields of DB (docs/architecture.md#storages-files):
// state of one concern belongs in a struct of its own (testHooks, the
// tenancy maps, the writer), not in one more field of the struct every
// file reads.
const maxDBFields = 30

// TestDBFieldsStayFew fails when DB grows past maxDBFields fields.
func TestDBFieldsStayFew(t *testing.T) {
	t.Parallel()
	if n := reflect.TypeFor[DB]().NumField(); n > maxDBFields {
		t.Errorf("got DB of %d fields, want at most %d: gather the new ones in a struct of their concern", n, maxDBFields)
	}
}

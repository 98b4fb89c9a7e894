package importer

// SetTotals sets the bytes one import of files and one Plausible export
// may read, for a test; restore sets them back.
func SetTotals(files, plausible int64) (restore func()) {
	f, p := maxFileBytes, maxPlausibleBytes
	maxFileBytes, maxPlausibleBytes = files, plausible
	return func() { maxFileBytes, maxPlausibleBytes = f, p }
}

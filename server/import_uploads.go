package server

import (
	"fmt"
	"sync"

	"github.com/tally-analytics/tally/fault"
)

// importUploads bounds the Plausible uploads in flight (docs/import.md#plausible,
// Uploads): each streams up to importUploadMax into a temporary file,
// so without a bound a few admins could fill the temporary folder. One
// upload per site at a time (a site's imports replace each other anyway),
// uploadsPerWorkspace per workspace, so one tenant cannot take them all,
// and uploadsInAll in all: at most uploadsInAll x 256 MiB of temporary
// files. A slot is taken before a byte of the body is read and given back
// when the request ends, its file deleted.
type importUploads struct {
	mu     sync.Mutex
	sites  map[string]bool
	spaces map[string]int
	all    int
}

// The bounds, variables for the tests.
var (
	uploadsPerWorkspace = 2
	uploadsInAll        = 4
)

// uploadsRetryAfter is the Retry-After of a refused upload, in seconds:
// an upload of an export takes seconds.
const uploadsRetryAfter = 10

func newImportUploads() *importUploads {
	return &importUploads{sites: map[string]bool{}, spaces: map[string]int{}}
}

// take reserves a slot for an upload into site of workspace, or says why
// there is none (429 imports_busy); release gives it back.
func (u *importUploads) take(site, workspace string) (release func(), err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	busy := func(format string, args ...any) error {
		return &fault.Error{Code: fault.ImportsBusy, Message: fmt.Sprintf(format, args...), RetryAfter: uploadsRetryAfter}
	}
	switch {
	case u.sites[site]:
		return nil, busy("an upload into this site is in progress: one at a time per site")
	case u.spaces[workspace] >= uploadsPerWorkspace:
		return nil, busy("%d uploads into this workspace's sites are in progress, the most at a time", uploadsPerWorkspace)
	case u.all >= uploadsInAll:
		return nil, busy("the server is taking %d uploads, the most at a time", uploadsInAll)
	}
	u.sites[site] = true
	u.spaces[workspace]++
	u.all++
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		delete(u.sites, site)
		if u.spaces[workspace]--; u.spaces[workspace] == 0 {
			delete(u.spaces, workspace)
		}
		u.all--
	}, nil
}

package storage

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// A run of intake (ingestRun) merges all of its identifies of one user
// into that user's profile in memory: it reads and parses the profile at
// the first one, merges each identify's traits as it comes, and writes the
// profile once, at the end (finish). Each identify used to read, merge and
// rewrite the whole profile: a batch of 2,500 identifies of one user
// rewrote it 2,500 times (docs/intake.md#profile-caps).

// runProfile is one user's profile as a run merges identifies into it.
type runProfile struct {
	traits *jsonNode // nil while the user has no profile
	// created and updated are the receive times of the run's first and
	// last identify of the user: the row's created_at, if new, and
	// updated_at.
	created, updated string
}

// identify merges the traits of e, an identify of a user received at
// recv, into the user's profile, and returns the names of its traits that
// the profile caps kept out (nil for none).
func (j *ingestRun) identify(e *IngestEvent, recv string) ([]string, error) {
	traits := e.Traits
	if traits == nil {
		traits = []byte("{}")
	}
	patch, err := parseTraits(traits)
	if err != nil {
		return nil, err
	}
	k := [2]string{e.SiteID, *e.UserID}
	p := j.profiles[k]
	if p == nil {
		var old []byte
		err := j.stmt(j.db.ingest.profileTraits).QueryRow(e.SiteID, *e.UserID).Scan(&old)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		j.profileRead += int64(len(old))
		p = &runProfile{created: recv}
		if old != nil {
			if p.traits, err = parseTraits(old); err != nil {
				return nil, err
			}
		}
		if j.profiles == nil {
			j.profiles = map[[2]string]*runProfile{}
		}
		j.profiles[k] = p
	}
	p.updated = recv
	var dropped [][]byte
	p.traits, dropped = mergeProfile(p.traits, patch, defaultCaps)
	return traitNames(dropped), nil
}

// traitNames decodes the names (quoted, as sent) of traits; nil (a
// whole patch that is not an object) is "".
func traitNames(names [][]byte) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		if n != nil {
			json.Unmarshal(n, &out[i])
		}
	}
	return out
}

// writeProfiles writes each profile the run merged identifies into, once,
// in the order of their keys (intake_lock_order.go).
func (j *ingestRun) writeProfiles() error {
	if len(j.profiles) == 0 {
		return nil
	}
	write := j.stmt(j.db.ingest.profile)
	var written int64
	for _, k := range sortedKeys(j.profiles, comparePairs) {
		p := j.profiles[k]
		traits := p.traits.appendTo(nil)
		written += int64(len(traits))
		if _, err := write.Exec(k[0], k[1], string(traits), p.created, p.updated); err != nil {
			return fmt.Errorf("user profile: %w", err)
		}
	}
	if f := j.db.hooks.profileRunBytes; f != nil {
		f(j.profileRead, written)
	}
	return nil
}

package server

import (
	"context"
	"fmt"

	"github.com/tally-analytics/tally/storage"
)

// DevSetup is what dev mode (and servertest) creates: a workspace with one
// site and a key of each scope, and where to reach them. Dev mode prints it.
type DevSetup struct {
	CollectorURL string  `json:"collector_url"`
	QueryURL     string  `json:"query_url"`
	AdminToken   string  `json:"admin_token"`
	Workspace    string  `json:"workspace"`
	SiteID       string  `json:"site_id"`
	Keys         DevKeys `json:"keys"`
}

// DevKeys are the plaintexts of the keys dev mode creates.
type DevKeys struct {
	Admin  string `json:"admin"`
	Ingest string `json:"ingest"`
	Query  string `json:"query"`
}

// SeedDev creates workspace "dev" with site "dev-site" and three keys
// (admin, ingest:write, query:read) in inst's database.
func SeedDev(ctx context.Context, inst *Instance, adminToken string) (DevSetup, error) {
	setup := DevSetup{CollectorURL: inst.CollectorURL, QueryURL: inst.QueryURL, AdminToken: adminToken,
		Workspace: "dev", SiteID: "dev-site"}
	actor := storage.Actor{Kind: storage.ActorSystem}
	ws, err := inst.DB.CreateWorkspace(ctx, actor, "Development", setup.Workspace)
	if err != nil {
		return setup, fmt.Errorf("seed workspace: %w", err)
	}
	if _, err := inst.DB.CreateSite(ctx, actor, ws, setup.SiteID, "Development site"); err != nil {
		return setup, fmt.Errorf("seed site: %w", err)
	}
	for _, k := range []struct {
		dst   *string
		scope string
	}{{&setup.Keys.Admin, storage.ScopeAdmin}, {&setup.Keys.Ingest, storage.ScopeIngestWrite}, {&setup.Keys.Query, storage.ScopeQueryRead}} {
		_, plaintext, err := inst.DB.CreateKey(ctx, actor, ws, "dev "+k.scope, []string{k.scope})
		if err != nil {
			return setup, fmt.Errorf("seed key: %w", err)
		}
		*k.dst = plaintext
	}
	return setup, nil
}

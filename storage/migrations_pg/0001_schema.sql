-- Placeholder until branch h/pgschema's schema is merged: the tenancy
-- tables Open loads. Deleted before that merge.
CREATE TABLE workspaces (id text COLLATE "C" PRIMARY KEY, name text NOT NULL, slug text COLLATE "C" NOT NULL UNIQUE, created_at text NOT NULL);
CREATE TABLE sites (id text COLLATE "C" PRIMARY KEY, workspace_id text NOT NULL, name text NOT NULL, created_at text NOT NULL,
	retention_days integer NOT NULL DEFAULT 0, purged_before text, time_zone text NOT NULL DEFAULT 'UTC');
CREATE TABLE api_keys (id text COLLATE "C" PRIMARY KEY, workspace_id text NOT NULL, label text NOT NULL, scopes text NOT NULL,
	created_at text NOT NULL, last_used_at text, revoked_at text, key_hash text NOT NULL UNIQUE, sites text);
CREATE TABLE site_aliases (site_id text COLLATE "C" NOT NULL, alias text COLLATE "C" NOT NULL, PRIMARY KEY (site_id, alias));
CREATE TABLE site_usage (site_id text COLLATE "C" NOT NULL, month text NOT NULL, accepted bigint NOT NULL, PRIMARY KEY (site_id, month));
